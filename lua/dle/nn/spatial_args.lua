--- Argument checks shared by the N-d window functions (functional_convnd.lua, functional_pool.lua)
-- and their modules (convnd.lua, pools.lua): size arguments as lists of integers, an input with
-- or without its batch dim. Every error names the calling function (fn).
local dle = require("dle")
local check = require("dle.check")

local M = {}

local LAYOUT = {"{N, C, L}", "{N, C, H, W}", "{N, C, D, H, W}"}

--- v as text for messages: a list as {a,b}, anything else by tostring.
function M.repr(v)
  if type(v) ~= "table" then return tostring(v) end
  local s = {}
  for i, x in ipairs(v) do s[i] = tostring(x) end
  return "{" .. table.concat(s, ",") .. "}"
end

--- v (an integer, or a list of ns integers) as a list of ns integers >= lo.
function M.tuple(fn, what, v, ns, lo)
  local t
  if math.type(v) == "integer" then
    t = {}
    for i = 1, ns do t[i] = v end
  elseif type(v) == "table" and #v == ns then
    t = {}
    for i = 1, ns do
      if math.type(v[i]) ~= "integer" then t = nil; break end
      t[i] = v[i]
    end
  end
  if not t then
    check.error(string.format("%s: %s must be an integer or a list of %d integers, got %s", fn, what, ns,
      M.repr(v)))
  end
  for i = 1, ns do
    if t[i] < lo then check.error(string.format("%s: %s must be >= %d, got %s", fn, what, lo, M.repr(v))) end
  end
  return t
end

--- A conv module's padding_mode (default "zeros"; "reflect", "replicate" and "circular" pad x in
-- that mode first, unless zeros_only, as PyTorch's transposed convolutions).
function M.padding_mode(fn, mode, zeros_only)
  mode = mode or "zeros"
  local ok = {zeros = true, reflect = not zeros_only, replicate = not zeros_only, circular = not zeros_only}
  if not ok[mode] then
    check.error(string.format('%s: padding_mode must be %s, got %s', fn,
      zeros_only and '"zeros"' or '"zeros", "reflect", "replicate" or "circular"', tostring(mode)))
  end
  return mode
end

--- The padding of a conv before and after each of its ns dims from p: an integer or a list
-- (symmetric), "valid" (none) or "same" (d (k - 1) in all, the odd one after as PyTorch; stride 1).
function M.conv_padding(fn, p, ns, kernel, stride, dilation)
  local lo, hi = {}, {}
  if p == "same" then
    for i = 1, ns do
      if stride[i] ~= 1 then check.error(fn .. ': padding "same" needs stride 1, got stride ' .. M.repr(stride)) end
      local total = dilation[i] * (kernel[i] - 1)
      lo[i], hi[i] = total // 2, total - total // 2
    end
  elseif p == "valid" then
    for i = 1, ns do lo[i], hi[i] = 0, 0 end
  else
    if type(p) == "string" then
      check.error(fn .. ': padding must be an integer, a list, "same" or "valid", got "' .. p .. '"')
    end
    lo = M.tuple(fn, "padding", p, ns, 0)
    for i = 1, ns do hi[i] = lo[i] end
  end
  return lo, hi
end

--- x with ns spatial dims as a batch: {N, C, ...} as is, {C, ...} with a batch dim of 1 in front
-- (the second result is then true, for the caller to squeeze it off the result).
function M.batched(fn, x, ns)
  check.tensor(x, fn, "input")
  if x:dim() == ns + 2 then return x, false end
  if x:dim() == ns + 1 then return x:unsqueeze(1), true end
  check.error(string.format("%s: expected a %d-D input %s (or %d-D without the batch dim), got %s", fn, ns + 2,
    LAYOUT[ns], ns + 1, check.shape_str(x)))
end

--- The sizes of x's last ns dims.
function M.spatial(x, ns)
  local s = {}
  for i = 1, ns do s[i] = x:size(x:dim() - ns + i) end
  return s
end

--- 1-based positions along a dim of the input each of k taps (dilated by dil) reads for each of n
-- outputs at stride s, tap-major ({k * n}, int64).
function M.tap_index(k, dil, n, s, device)
  local o = {dtype = "int64", device = device}
  return ((dle.arange(0, k, 1, o) * dil):reshape(k, 1) + dle.arange(0, n, 1, o) * s + 1):reshape(-1)
end

--- F.pad's list for per-dim pads lo[i], hi[i] of the last ns dims (last dim first, as PyTorch orders it).
function M.pad_list(lo, hi)
  local p, ns = {}, #lo
  for i = ns, 1, -1 do p[#p + 1] = lo[i]; p[#p + 1] = hi[i] end
  return p
end

return M
