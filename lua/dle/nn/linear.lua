--- dle.nn.Linear(in, out, {bias = true, dtype, generator}): y = x @ W^T + b, W {out, in}, b {out}.
-- Default init as PyTorch: W and b ~ U(-1/sqrt(in), 1/sqrt(in)).
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")

local Linear = Module:extend("Linear")

--- @param in_features integer
-- @param out_features integer
-- @param opts optional {bias = true, dtype = "float32", generator = g}
function Linear:init(in_features, out_features, opts)
  opts = check.layer_args("Linear", opts, {"bias", "dtype", "generator"}, "positive integer sizes (in, out)",
                          in_features, out_features)
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  local o = {dtype = opts.dtype or "float32"}
  local g = opts.generator and {generator = opts.generator} or nil
  self.weight = dle.empty(out_features, in_features, o):uniform_(-bound, bound, g):requires_grad_(true)
  if opts.bias ~= false then
    self.bias = dle.empty(out_features, o):uniform_(-bound, bound, g):requires_grad_(true)
  end
end

--- @param x tensor {..., in}
-- @return tensor {..., out}
function Linear:forward(x)
  if not dle.is_tensor(x) then check.error("Linear: input must be a tensor, got " .. type(x)) end
  if x:dim() < 1 or x:size(-1) ~= self.in_features then
    check.error("Linear: input has " .. (x:dim() > 0 and x:size(-1) or 0) .. " features (shape {"
      .. table.concat(x:shape(), ",") .. "}), expected " .. self.in_features)
  end
  return F.linear(x, self.weight, self.bias)
end

--- 2 * rows * in * out (one matmul).
function Linear:flops(inputs)
  local x = inputs[1]
  return 2 * (x:numel() // self.in_features) * self.in_features * self.out_features
end

function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
                       tostring(self.bias ~= nil))
end

return Linear
