--- dle.nn.init: in-place initializers (run under no_grad, return the tensor). Each accepts a
-- trailing options table with {generator = g} for reproducible draws.
-- Fans follow PyTorch: for a {out, in, k...} tensor, fan_in = in * prod(k), fan_out = out * prod(k).
local dle = require("dle")
local check = require("dle.check")

local I = {}

local function check_float(fname, t)
  if not dle.is_tensor(t) then check.error(fname .. ": expected a tensor, got " .. type(t)) end
  if not t:is_floating_point() then check.error(fname .. ": expected a float tensor, got " .. t:dtype()) end
end

local KAIMING_OPTS = {"a", "mode", "nonlinearity", "generator"}

-- The creation options {generator = g} of opts (known: the option names fname accepts).
local function gen(fname, opts, known)
  opts = check.options(opts, fname, known or {"generator"})
  return opts.generator and {generator = opts.generator} or nil
end

-- Fans of t for the initializer fname (named in the errors).
local function fans(t, fname)
  if t:dim() < 2 then
    check.error(fname .. ": fan in/out need a tensor of at least 2 dims, got shape {"
      .. table.concat(t:shape(), ",") .. "}")
  end
  local rf = 1
  for d = 3, t:dim() do rf = rf * t:size(d) end
  return t:size(2) * rf, t:size(1) * rf
end

--- Fans of a tensor of 2 or more dimensions.
-- @return fan_in, fan_out
function I.calculate_fans(t)
  check.tensor(t, "calculate_fans", "tensor")
  return fans(t, "calculate_fans")
end

--- Recommended gain for a nonlinearity (as torch.nn.init.calculate_gain).
-- @param nonlinearity "linear", "sigmoid", "tanh", "relu", "leaky_relu", "selu", "conv2d", ...
-- @param param negative slope for leaky_relu (default 0.01)
-- @return number
function I.calculate_gain(nonlinearity, param)
  local n = check.string(nonlinearity or "leaky_relu", "calculate_gain", "nonlinearity")
  if n == "linear" or n == "sigmoid" or n == "identity" or n:match("^conv") then return 1 end
  if n == "tanh" then return 5 / 3 end
  if n == "relu" then return math.sqrt(2) end
  if n == "leaky_relu" then
    local a = check.number(param or 0.01, "calculate_gain", "param")
    return math.sqrt(2 / (1 + a * a))
  end
  if n == "selu" then return 3 / 4 end
  check.error("calculate_gain: unknown nonlinearity '" .. tostring(n) .. "'")
end

-- Fills t in place with the tensor method of the same name (uniform_, normal_) and its two
-- parameters, outside autograd.
local function sample(fname, t, p1, p2, opts)
  check_float(fname, t)
  local g = gen(fname, opts)
  dle.no_grad(function() t[fname](t, p1, p2, g) end)
  return t
end

--- uniform_(t, a = 0, b = 1, opts): U(a, b).
function I.uniform_(t, a, b, opts) return sample("uniform_", t, a or 0, b or 1, opts) end

--- normal_(t, mean = 0, std = 1, opts): N(mean, std^2).
function I.normal_(t, mean, std, opts) return sample("normal_", t, mean or 0, std or 1, opts) end

local function fill(fname, t, v)
  check_float(fname, t)
  check.number(v, fname, "value")
  dle.no_grad(function() t:fill_(v) end)
  return t
end

--- constant_(t, v): fills with v.
function I.constant_(t, v) return fill("constant_", t, v) end

--- zeros_(t): fills with 0.
function I.zeros_(t) return fill("zeros_", t, 0) end

--- ones_(t): fills with 1.
function I.ones_(t) return fill("ones_", t, 1) end

--- xavier_uniform_(t, gain = 1, opts): U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
function I.xavier_uniform_(t, gain, opts)
  check_float("xavier_uniform_", t)
  local fi, fo = fans(t, "xavier_uniform_")
  local a = check.number(gain or 1, "xavier_uniform_", "gain") * math.sqrt(6 / (fi + fo))
  return I.uniform_(t, -a, a, opts)
end

--- xavier_normal_(t, gain = 1, opts): N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
function I.xavier_normal_(t, gain, opts)
  check_float("xavier_normal_", t)
  local fi, fo = fans(t, "xavier_normal_")
  return I.normal_(t, 0, check.number(gain or 1, "xavier_normal_", "gain") * math.sqrt(2 / (fi + fo)), opts)
end

local function kaiming_std(fname, t, opts)
  opts = check.options(opts, fname, KAIMING_OPTS)
  local mode = opts.mode or "fan_in"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    check.error(fname .. ": mode must be 'fan_in' or 'fan_out', got '" .. tostring(mode) .. "'")
  end
  local fi, fo = fans(t, fname)
  local gain = I.calculate_gain(opts.nonlinearity or "leaky_relu", opts.a or 0)
  return gain / math.sqrt(mode == "fan_in" and fi or fo)
end

--- kaiming_uniform_(t, {a = 0, mode = "fan_in", nonlinearity = "leaky_relu", generator}):
-- U(-b, b), b = gain * sqrt(3 / fan).
function I.kaiming_uniform_(t, opts)
  check_float("kaiming_uniform_", t)
  local b = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, opts)
  return I.uniform_(t, -b, b, gen("kaiming_uniform_", opts, KAIMING_OPTS))
end

--- kaiming_normal_(t, {a = 0, mode = "fan_in", nonlinearity = "leaky_relu", generator}):
-- N(0, std^2), std = gain / sqrt(fan).
function I.kaiming_normal_(t, opts)
  check_float("kaiming_normal_", t)
  return I.normal_(t, 0, kaiming_std("kaiming_normal_", t, opts), gen("kaiming_normal_", opts, KAIMING_OPTS))
end

--- trunc_normal_(t, std, a, b, opts): N(0, std^2) truncated to [a, b] by resampling the values
-- that fall outside. Defaults: std = 1/sqrt(fan_in) (fan_in = size of the last dim for 1-D
-- tensors), a = -3*std, b = 3*std.
function I.trunc_normal_(t, std, a, b, opts)
  check_float("trunc_normal_", t)
  if std == nil then
    local fi = t:dim() >= 2 and fans(t, "trunc_normal_") or math.max(t:numel(), 1)
    std = 1 / math.sqrt(fi)
  end
  check.number(std, "trunc_normal_", "std")
  a, b = check.number(a or -3 * std, "trunc_normal_", "a"), check.number(b or 3 * std, "trunc_normal_", "b")
  opts = check.options(opts, "trunc_normal_", {"generator"})
  -- not (a < b): a NaN bound is refused too
  if not (a < b) then -- luacheck: ignore 581
    check.error("trunc_normal_: need a < b, got [" .. a .. ", " .. b .. "]")
  end
  if a > 3 * std or b < -3 * std then
    check.error("trunc_normal_: interval [" .. a .. ", " .. b .. "] is too far from the mean for resampling (std "
                .. std .. ")")
  end
  dle.no_grad(function()
    local o = {dtype = t:dtype(), generator = opts.generator}
    local shape = t:shape()
    local r = dle.randn(shape, o) * std
    for _ = 1, 1000 do
      local bad = r:clamp(a, b):ne(r)
      if not bad:any():item() then break end
      r = dle.where(bad, dle.randn(shape, o) * std, r)
    end
    t:copy_(r:clamp(a, b))
  end)
  return t
end

return I
