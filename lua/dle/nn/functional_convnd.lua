--- dle.nn.functional (convolution part): conv1d, conv2d, conv3d, conv_transpose1d/2d/3d, unfold and
-- fold with PyTorch's arguments, weight layouts and output sizes. They are compositions of dle's
-- 2-D convolution ops, so both autograd modes, dtypes and devices come from those ops:
--   conv1d            conv2d over {N, C, 1, L} with a {1, k} kernel;
--   conv3d            one conv2d with the depth taps folded into the channels: the kd input planes
--                     each output depth reads, gathered (index_select) into {N*Do, kd*Cin, H, W},
--                     against the weight as {Cout, kd*Cin/groups, kh, kw};
--   conv_transpose2d  conv2d's input gradient (the op conv2d_grad_input; its gradients are conv2d
--                     and conv2d's weight gradient); 1d through a unit dim; 3d is the adjoint of
--                     conv3d's composition (conv2d_grad_input, then index_add of the depth taps);
--   unfold / fold     index_select / index_add of the positions im2col reads in the padded planes.
-- This file returns them; dle.nn.functional gathers them.
local dle = require("dle")
local check = require("dle.check")
local F = require("dle.nn.functional")
local S = require("dle.nn.spatial_args")

local M = {}

local CONV_OPTS = {"stride", "padding", "dilation", "groups"}
local TRANSPOSE_OPTS = {"stride", "padding", "output_padding", "groups", "dilation"}
local FOLD_OPTS = {"dilation", "padding", "stride"}
local CONV_LAYOUT = {"{Cout, Cin/groups, k}", "{Cout, Cin/groups, kh, kw}", "{Cout, Cin/groups, kd, kh, kw}"}
local TRANSPOSE_LAYOUT = {"{Cin, Cout/groups, k}", "{Cin, Cout/groups, kh, kw}", "{Cin, Cout/groups, kd, kh, kw}"}
local shape_str = check.shape_str

-- The kernel sizes of an (ns + 2)-D weight.
local function kernel_of(fn, w, ns, layout)
  check.tensor(w, fn, "weight")
  if w:dim() ~= ns + 2 then
    check.error(string.format("%s: weight must be %d-D %s, got %s", fn, ns + 2, layout, shape_str(w)))
  end
  local k = {}
  for i = 1, ns do k[i] = w:size(i + 2) end
  return k
end

local function check_bias(fn, bias, n)
  if bias == nil then return end
  check.tensor(bias, fn, "bias")
  if bias:dim() ~= 1 or bias:size(1) ~= n then
    check.error(string.format("%s: bias must have shape {%d} (one per output channel), got %s", fn, n, shape_str(bias)))
  end
end

local function groups_of(fn, opts)
  local g = opts.groups or 1
  if math.type(g) ~= "integer" or g < 1 then
    check.error(fn .. ": groups must be a positive integer, got " .. tostring(g))
  end
  return g
end

-- ---- convolution: CONV[ns](x, w, bias, q) with x batched and q's padding symmetric

local CONV = {}
CONV[1] = function(x, w, b, q)
  return dle.conv2d(x:unsqueeze(3), w:unsqueeze(3), b, {stride = {1, q.stride[1]}, padding = {0, q.padding[1]},
    dilation = {1, q.dilation[1]}, groups = q.groups}):squeeze(3)
end
CONV[2] = function(x, w, b, q) return dle.conv2d(x, w, b, q) end
CONV[3] = function(x, w, b, q)
  local n, d = x:size(1), x:size(3)
  local o, cg, kd, g = w:size(1), w:size(2), w:size(3), q.groups
  local pd, sd, dd = q.padding[1], q.stride[1], q.dilation[1]
  if pd > 0 then x = F.pad(x, {0, 0, 0, 0, pd, pd}) end
  local dout = (d + 2 * pd - dd * (kd - 1) - 1) // sd + 1
  local h, wd = x:size(4), x:size(5)
  local xs = x:index_select(3, S.tap_index(kd, dd, dout, sd, x:device()))   -- {N, C, kd*Do, H, W}
  xs = xs:reshape(n, g, cg, kd, dout, h, wd):permute(1, 5, 2, 4, 3, 6, 7):reshape(n * dout, g * kd * cg, h, wd)
  local w2 = w:permute(1, 3, 2, 4, 5):reshape(o, kd * cg, w:size(4), w:size(5))
  local y = dle.conv2d(xs, w2, b, {stride = {q.stride[2], q.stride[3]}, padding = {q.padding[2], q.padding[3]},
    dilation = {q.dilation[2], q.dilation[3]}, groups = g})
  return y:reshape(n, dout, o, y:size(3), y:size(4)):permute(1, 3, 2, 4, 5):contiguous()
end

-- conv over ns spatial dims (PyTorch's conv1d/2d/3d): checks, the odd "same" pad, the batch dim.
local function conv(fn, ns, x, weight, bias, opts)
  opts = check.options(opts, fn, CONV_OPTS)
  local xb, added = S.batched(fn, x, ns)
  local k = kernel_of(fn, weight, ns, CONV_LAYOUT[ns])
  local g = groups_of(fn, opts)
  local stride = S.tuple(fn, "stride", opts.stride or 1, ns, 1)
  local dil = S.tuple(fn, "dilation", opts.dilation or 1, ns, 1)
  local lo, hi = S.conv_padding(fn, opts.padding or 0, ns, k, stride, dil)
  local c, o = xb:size(2), weight:size(1)
  if c % g ~= 0 or o % g ~= 0 or weight:size(2) * g ~= c then
    check.error(string.format("%s: input %s (%d channels) and weight %s do not match with groups = %d: the "
      .. "weight must be %s with Cin and Cout divisible by groups", fn, shape_str(xb), c, shape_str(weight), g,
      CONV_LAYOUT[ns]))
  end
  check_bias(fn, bias, o)
  local sp, extra, odd = S.spatial(xb, ns), {}, false
  for i = 1, ns do
    if sp[i] + lo[i] + hi[i] < dil[i] * (k[i] - 1) + 1 then
      check.error(string.format("%s: input %s padded by %s, %s is smaller than the kernel %s dilated by %s", fn,
        shape_str(xb), S.repr(lo), S.repr(hi), S.repr(k), S.repr(dil)))
    end
    extra[i], odd = hi[i] - lo[i], odd or hi[i] ~= lo[i]
  end
  if odd then   -- "same" with an even dilated kernel: the odd pad after goes on x, the rest to conv2d
    local none = {}
    for i = 1, ns do none[i] = 0 end
    xb = F.pad(xb, S.pad_list(none, extra))
  end
  local y = CONV[ns](xb, weight, bias, {stride = stride, padding = lo, dilation = dil, groups = g})
  if added then y = y:squeeze(1) end
  return y
end

--- conv1d(x, weight, bias, opts): 1-D cross-correlation (PyTorch's conv1d) of x {N, Cin, L} (or
-- {Cin, L}) with weight {Cout, Cin/groups, k}, plus bias {Cout} (or nil).
-- L_out = (L + 2 padding - dilation (k - 1) - 1) // stride + 1.
-- @param opts optional {stride = 1, padding = 0, dilation = 1, groups = 1}; padding is an integer,
--   "valid" (0) or "same" (output as long as the input, stride 1; an odd total pads one more after)
-- @return tensor {N, Cout, L_out}
function M.conv1d(x, weight, bias, opts) return conv("conv1d", 1, x, weight, bias, opts) end

--- conv2d(x, weight, bias, opts): 2-D cross-correlation (PyTorch's conv2d) of x {N, Cin, H, W} (or
-- {Cin, H, W}) with weight {Cout, Cin/groups, kh, kw}, plus bias {Cout} (or nil).
-- @param opts optional {stride = 1, padding = 0, dilation = 1, groups = 1}; stride, padding and
--   dilation are integers or {h, w} pairs; padding may also be "valid" or "same" (stride 1)
-- @return tensor {N, Cout, Hout, Wout}
function M.conv2d(x, weight, bias, opts) return conv("conv2d", 2, x, weight, bias, opts) end

--- conv3d(x, weight, bias, opts): 3-D cross-correlation (PyTorch's conv3d) of x {N, Cin, D, H, W}
-- (or {Cin, D, H, W}) with weight {Cout, Cin/groups, kd, kh, kw}, plus bias {Cout} (or nil).
-- @param opts optional {stride = 1, padding = 0, dilation = 1, groups = 1}: integers or {d, h, w};
--   padding may also be "valid" or "same" (stride 1)
-- @return tensor {N, Cout, Dout, Hout, Wout}
function M.conv3d(x, weight, bias, opts) return conv("conv3d", 3, x, weight, bias, opts) end

-- ---- transposed convolution: TRANSPOSE[ns](x, w, q, sizes, out) with x batched

-- conv2d's input gradient of x {N, Cin, H, W} (as its grad_output) with w: {N, Cout, out[1], out[2]}.
local function grad_input_2d(x, w, q, sp, out)
  local o = {stride = q.stride, dilation = q.dilation, groups = q.groups}
  if q.output_padding[1] < q.stride[1] and q.output_padding[2] < q.stride[2] then
    o.padding = q.padding
    return x:conv2d_grad_input(w, out, o)
  end
  -- output_padding >= stride (it may reach the dilation): every position the taps reach, unpadded,
  -- then output_padding zeros after and the padding cropped off both sides
  local full, lo, hi = {}, {}, {}
  for i = 1, 2 do
    full[i] = (sp[i] - 1) * q.stride[i] + q.dilation[i] * (w:size(i + 2) - 1) + 1
    lo[i], hi[i] = -q.padding[i], q.output_padding[i] - q.padding[i]
  end
  return F.pad(x:conv2d_grad_input(w, full, o), S.pad_list(lo, hi))
end

-- q's lists from dim `from` on (the 2-D part of a 3-D q), or with a unit dim in front (of a 1-D q)
local function q2(q, from)
  local r = {groups = q.groups}
  for _, f in ipairs({"stride", "padding", "output_padding", "dilation"}) do
    r[f] = from and {q[f][from], q[f][from + 1]} or {(f == "padding" or f == "output_padding") and 0 or 1, q[f][1]}
  end
  return r
end

local TRANSPOSE = {}
TRANSPOSE[1] = function(x, w, q, sp, out)
  return grad_input_2d(x:unsqueeze(3), w:unsqueeze(3), q2(q), {1, sp[1]}, {1, out[1]}):squeeze(3)
end
TRANSPOSE[2] = grad_input_2d
TRANSPOSE[3] = function(x, w, q, sp, out)
  local n, cin, d = x:size(1), x:size(2), sp[1]
  local cg, kd, g = w:size(2), w:size(3), q.groups
  local sd, dd, pd = q.stride[1], q.dilation[1], q.padding[1]
  local xr = x:permute(1, 3, 2, 4, 5):reshape(n * d, cin, sp[2], sp[3])
  local w2 = w:permute(1, 3, 2, 4, 5):reshape(cin, kd * cg, w:size(4), w:size(5))
  local z = grad_input_2d(xr, w2, q2(q, 2), {sp[2], sp[3]}, {out[2], out[3]})   -- {N*D, g*kd*cg, Ho, Wo}
  local h, wd = z:size(3), z:size(4)
  z = z:reshape(n, d, g, kd, cg, h, wd):permute(1, 3, 5, 4, 2, 6, 7):reshape(n, g * cg, kd * d, h, wd)
  local full = (d - 1) * sd + dd * (kd - 1) + 1
  local y = dle.zeros({n, g * cg, full, h, wd}, {dtype = z:dtype(), device = z:device()})
    :index_add(3, S.tap_index(kd, dd, d, sd, z:device()), z)
  if pd == 0 and q.output_padding[1] == 0 then return y end
  return F.pad(y, {0, 0, 0, 0, -pd, q.output_padding[1] - pd})
end

local function conv_transpose(fn, ns, x, weight, bias, opts)
  opts = check.options(opts, fn, TRANSPOSE_OPTS)
  local xb, added = S.batched(fn, x, ns)
  local k = kernel_of(fn, weight, ns, TRANSPOSE_LAYOUT[ns])
  local q = {groups = groups_of(fn, opts), stride = S.tuple(fn, "stride", opts.stride or 1, ns, 1),
             padding = S.tuple(fn, "padding", opts.padding or 0, ns, 0),
             output_padding = S.tuple(fn, "output_padding", opts.output_padding or 0, ns, 0),
             dilation = S.tuple(fn, "dilation", opts.dilation or 1, ns, 1)}
  local c, g = xb:size(2), q.groups
  if weight:size(1) ~= c or c % g ~= 0 then
    check.error(string.format("%s: input %s (%d channels) and weight %s do not match with groups = %d: the "
      .. "weight must be %s with Cin divisible by groups", fn, shape_str(xb), c, shape_str(weight), g,
      TRANSPOSE_LAYOUT[ns]))
  end
  local cout = weight:size(2) * g
  check_bias(fn, bias, cout)
  local sp, out, bshape = S.spatial(xb, ns), {}, {1, cout}
  for i = 1, ns do
    if q.output_padding[i] >= math.max(q.stride[i], q.dilation[i]) then
      check.error(string.format("%s: output_padding %s must be smaller than the stride %s or the dilation %s", fn,
        S.repr(q.output_padding), S.repr(q.stride), S.repr(q.dilation)))
    end
    out[i] = (sp[i] - 1) * q.stride[i] - 2 * q.padding[i] + q.dilation[i] * (k[i] - 1) + q.output_padding[i] + 1
    if out[i] < 1 then
      check.error(string.format("%s: input %s with kernel %s, stride %s and padding %s gives no output (size %s)",
        fn, shape_str(xb), S.repr(k), S.repr(q.stride), S.repr(q.padding), S.repr(out)))
    end
    bshape[i + 2] = 1
  end
  local y = TRANSPOSE[ns](xb, weight, q, sp, out)
  if bias then y = y + bias:reshape(bshape) end
  if added then y = y:squeeze(1) end
  return y
end

--- conv_transpose1d(x, weight, bias, opts): the transposed 1-D convolution (PyTorch's
-- conv_transpose1d, the gradient of conv1d with respect to its input) of x {N, Cin, L} (or {Cin, L})
-- with weight {Cin, Cout/groups, k}, plus bias {Cout} (or nil).
-- L_out = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1.
-- @param opts optional {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1};
--   output_padding must be smaller than the stride or the dilation
-- @return tensor {N, Cout, L_out}
function M.conv_transpose1d(x, weight, bias, opts)
  return conv_transpose("conv_transpose1d", 1, x, weight, bias, opts)
end

--- conv_transpose2d(x, weight, bias, opts): the transposed 2-D convolution (PyTorch's
-- conv_transpose2d) of x {N, Cin, H, W} (or {Cin, H, W}) with weight {Cin, Cout/groups, kh, kw},
-- plus bias {Cout} (or nil); sizes per dim as conv_transpose1d's.
-- @param opts optional {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1};
--   integers or {h, w}
-- @return tensor {N, Cout, Hout, Wout}
function M.conv_transpose2d(x, weight, bias, opts)
  return conv_transpose("conv_transpose2d", 2, x, weight, bias, opts)
end

--- conv_transpose3d(x, weight, bias, opts): the transposed 3-D convolution (PyTorch's
-- conv_transpose3d) of x {N, Cin, D, H, W} (or {Cin, D, H, W}) with weight {Cin, Cout/groups, kd,
-- kh, kw}, plus bias {Cout} (or nil); sizes per dim as conv_transpose1d's.
-- @param opts optional {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1};
--   integers or {d, h, w}
-- @return tensor {N, Cout, Dout, Hout, Wout}
function M.conv_transpose3d(x, weight, bias, opts)
  return conv_transpose("conv_transpose3d", 3, x, weight, bias, opts)
end

-- ---- unfold / fold

-- 1-based positions in a flattened padded plane of width wp that unfold reads, ordered
-- (kernel row, kernel column, output row, output column) as PyTorch's columns are.
local function im2col_index(k, q, wp, out, device)
  local o = {dtype = "int64", device = device}
  local i = dle.arange(0, k[1], 1, o):reshape(k[1], 1, 1, 1) * (q.dilation[1] * wp)
  local j = dle.arange(0, k[2], 1, o):reshape(1, k[2], 1, 1) * q.dilation[2]
  local oh = dle.arange(0, out[1], 1, o):reshape(1, 1, out[1], 1) * (q.stride[1] * wp)
  local ow = dle.arange(0, out[2], 1, o):reshape(1, 1, 1, out[2]) * q.stride[2]
  return (i + j + oh + ow + 1):reshape(-1)
end

-- The geometry of unfold/fold over planes of size sp: q, the block grid out and the padded size.
local function fold_geometry(fn, kernel_size, opts, sp, what)
  local k = S.tuple(fn, "kernel_size", kernel_size, 2, 1)
  local q = {dilation = S.tuple(fn, "dilation", opts.dilation or 1, 2, 1),
             padding = S.tuple(fn, "padding", opts.padding or 0, 2, 0),
             stride = S.tuple(fn, "stride", opts.stride or 1, 2, 1)}
  local out, padded = {}, {sp[1] + 2 * q.padding[1], sp[2] + 2 * q.padding[2]}
  for i = 1, 2 do
    local span = q.dilation[i] * (k[i] - 1) + 1
    if padded[i] < span then
      check.error(string.format("%s: %s padded to %s is smaller than the kernel %s dilated by %s", fn, what,
        S.repr(padded), S.repr(k), S.repr(q.dilation)))
    end
    out[i] = (padded[i] - span) // q.stride[i] + 1
  end
  return k, q, out, padded
end

--- unfold(x, kernel_size, opts): the sliding blocks of x {N, C, H, W} (or {C, H, W}) as columns
-- (PyTorch's unfold, im2col): {N, C*kh*kw, L}, L the number of blocks, each column ordered
-- (channel, kernel row, kernel column).
-- @param kernel_size integer or {kh, kw}
-- @param opts optional {dilation = 1, padding = 0, stride = 1}, integers or {h, w}
-- @return tensor {N, C*kh*kw, L}
function M.unfold(x, kernel_size, opts)
  opts = check.options(opts, "unfold", FOLD_OPTS)
  local xb, added = S.batched("unfold", x, 2)
  local k, q, out, padded = fold_geometry("unfold", kernel_size, opts, S.spatial(xb, 2),
    "input " .. shape_str(x))
  local n, c = xb:size(1), xb:size(2)
  if q.padding[1] + q.padding[2] > 0 then xb = F.pad(xb, S.pad_list(q.padding, q.padding)) end
  local cols = xb:reshape(n, c, padded[1] * padded[2])
    :index_select(3, im2col_index(k, q, padded[2], out, xb:device()))
  local y = cols:reshape(n, c * k[1] * k[2], out[1] * out[2])
  if added then y = y:squeeze(1) end
  return y
end

--- fold(x, output_size, kernel_size, opts): sums columns {N, C*kh*kw, L} (or {C*kh*kw, L}) back
-- into planes {N, C, H, W} (PyTorch's fold, col2im; the adjoint of unfold: overlapping blocks add).
-- @param output_size integer or {H, W}
-- @param kernel_size integer or {kh, kw}
-- @param opts optional {dilation = 1, padding = 0, stride = 1}, integers or {h, w}
-- @return tensor {N, C, H, W}
function M.fold(x, output_size, kernel_size, opts)
  opts = check.options(opts, "fold", FOLD_OPTS)
  check.tensor(x, "fold", "input")
  if x:dim() ~= 2 and x:dim() ~= 3 then
    check.error("fold: expected a 3-D input {N, C*kh*kw, L} (or 2-D {C*kh*kw, L}), got " .. shape_str(x))
  end
  local added = x:dim() == 2
  local xb = added and x:unsqueeze(1) or x
  local size = S.tuple("fold", "output_size", output_size, 2, 1)
  local k, q, out, padded = fold_geometry("fold", kernel_size, opts, size, "output_size " .. S.repr(size))
  local n, ckk, l, kk = xb:size(1), xb:size(2), xb:size(3), k[1] * k[2]
  if ckk % kk ~= 0 or l ~= out[1] * out[2] then
    check.error(string.format("fold: input %s must be {N, C*%d, %d} for kernel %s and output_size %s "
      .. "(%dx%d blocks)", shape_str(x), kk, out[1] * out[2], S.repr(k), S.repr(size), out[1], out[2]))
  end
  local c = ckk // kk
  local y = dle.zeros({n, c, padded[1] * padded[2]}, {dtype = x:dtype(), device = x:device()})
    :index_add(3, im2col_index(k, q, padded[2], out, x:device()), xb:reshape(n, c, kk * l))
    :reshape(n, c, padded[1], padded[2])
  if q.padding[1] + q.padding[2] > 0 then
    y = F.pad(y, S.pad_list({-q.padding[1], -q.padding[2]}, {-q.padding[1], -q.padding[2]}))
  end
  if added then y = y:squeeze(1) end
  return y
end

return M
