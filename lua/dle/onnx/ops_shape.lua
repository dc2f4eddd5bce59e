--- dle.onnx.ops_shape: ONNX's shape, layout, indexing and constant operators on dle's views and
-- indexing ops. Shape-valued inputs (Reshape's shape, Slice's starts, ...) are read as Lua integers,
-- so they must be constants or computed from shapes (as exporters write them).
local dle = require("dle")
local U = require("dle.onnx.util")

local S = {}

S.Shape = function(ctx, x)
  local s = x:shape()
  local r = #s
  local lo, hi = ctx.a.start or 0, ctx.a["end"] or r
  if lo < 0 then lo = lo + r end
  if hi < 0 then hi = hi + r end
  lo, hi = math.max(0, math.min(lo, r)), math.max(0, math.min(hi, r))
  local out = {}
  for i = lo + 1, hi do out[#out + 1] = s[i] end
  return U.remember(dle.tensor(out, {dtype = "int64"}):reshape(#out), out)
end
S.Size = function(_, x) return dle.tensor(x:numel(), {dtype = "int64"}) end

-- Reshape: 0 copies the input's size (unless allowzero = 1), -1 is inferred.
S.Reshape = function(ctx, x, shape)
  local s = ctx.opset < 5 and ctx.a.shape or U.ints(shape)
  local xs = x:shape()
  local out = {}
  for i, v in ipairs(s) do
    if v == 0 and (ctx.a.allowzero or 0) == 0 then v = xs[i] end
    out[i] = v
  end
  return x:reshape(out)
end

S.Flatten = function(ctx, x)
  local r = x:dim()
  local axis = ctx.a.axis or 1
  if axis < 0 then axis = axis + r end
  local outer = 1
  for i = 1, axis do outer = outer * x:size(i) end
  return x:reshape(outer, x:numel() == 0 and 0 or -1)
end

S.Transpose = function(ctx, x)
  local r = x:dim()
  local perm = {}
  if ctx.a.perm then
    for i, p in ipairs(ctx.a.perm) do perm[i] = p + 1 end
  else
    for i = 1, r do perm[i] = r - i + 1 end
  end
  if r == 0 then return x end
  return x:permute(perm)
end

S.Squeeze = function(ctx, x, axes)
  axes = ctx.opset >= 13 and U.ints(axes) or ctx.a.axes
  local s = x:shape()
  local drop = {}
  if axes then
    for _, d in ipairs(U.dims(ctx, axes, #s)) do
      if s[d] ~= 1 then U.fail(ctx, ("cannot squeeze dim %d of size %d"):format(d, s[d])) end
      drop[d] = true
    end
  else
    for d, n in ipairs(s) do drop[d] = n == 1 end
  end
  local out = {}
  for d, n in ipairs(s) do
    if not drop[d] then out[#out + 1] = n end
  end
  return x:reshape(out)
end

S.Unsqueeze = function(ctx, x, axes)
  axes = ctx.opset >= 13 and U.ints(axes) or ctx.a.axes
  local r = x:dim() + #axes
  local new = {}
  for _, d in ipairs(U.dims(ctx, axes, r)) do new[d] = true end
  local s, out, j = x:shape(), {}, 1
  for d = 1, r do
    if new[d] then out[d] = 1 else out[d] = s[j]; j = j + 1 end
  end
  return x:reshape(out)
end

S.Concat = function(ctx, ...)
  local xs = {}
  for _, t in ipairs({...}) do xs[#xs + 1] = t end
  return dle.cat(xs, U.dim(ctx, ctx.a.axis, xs[1]:dim()))
end

-- Split: sizes from the `split` input (opset 13+) or attribute, else equal parts (the last one
-- smaller when num_outputs does not divide the dim, opset 18's rule).
S.Split = function(ctx, x, split)
  local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
  local sizes = ctx.opset >= 13 and U.ints(split) or ctx.a.split
  local n = #ctx.node.outputs
  if not sizes then
    local len = x:size(d)
    local each = math.ceil(len / n)
    sizes = {}
    for i = 1, n do sizes[i] = math.min(each, len - each * (i - 1)) end
  end
  local outs, start = {}, 1
  for i, len in ipairs(sizes) do
    outs[i] = x:narrow(d, start, len)
    start = start + len
  end
  return table.unpack(outs, 1, #sizes)
end

-- Slice: starts/ends clamped as Python slices, negative steps walk backwards (index_select).
S.Slice = function(ctx, x, starts, ends, axes, steps)
  if ctx.opset < 10 then
    starts, ends, axes = ctx.a.starts, ctx.a.ends, ctx.a.axes
  else
    starts, ends, axes, steps = U.ints(starts), U.ints(ends), U.ints(axes), U.ints(steps)
  end
  local r = x:dim()
  for i = 1, #starts do
    local d = axes and U.dim(ctx, axes[i], r) or i
    local n = x:size(d)
    local step = steps and steps[i] or 1
    if step == 0 then U.fail(ctx, "slice step 0") end
    local s, e = starts[i], ends[i]
    if s < 0 then s = s + n end
    if e < 0 then e = e + n end
    if step > 0 then
      s = math.max(0, math.min(s, n))
      e = math.max(0, math.min(e, n))
    else
      s = math.max(-1, math.min(s, n - 1))
      e = math.max(-1, math.min(e, n - 1))
    end
    if step == 1 then
      x = x:narrow(d, s + 1, math.max(0, e - s))
    else
      local count = step > 0 and math.max(0, (e - s + step - 1) // step) or math.max(0, (s - e - step - 1) // -step)
      if count == 0 then
        local sh = x:shape()
        sh[d] = 0
        x = dle.empty(sh, {dtype = x:dtype()})
      else
        x = x:index_select(d, dle.arange(s, s + step * count, step, {dtype = "int64"}):narrow(1, 1, count) + 1)
      end
    end
  end
  return x
end

-- Gather: indices (0-based, negative from the end) select along axis; the result's shape is
-- data's with that dim replaced by the indices' shape.
S.Gather = function(ctx, x, idx)
  local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
  local n = x:size(d)
  local i = idx:to("int64")
  i = dle.where(i:lt(0), i + n, i) + 1
  local ishape = i:shape()
  local y = x:index_select(d, i:reshape(-1))
  local s = x:shape()
  local out = {}
  for k = 1, d - 1 do out[#out + 1] = s[k] end
  for _, v in ipairs(ishape) do out[#out + 1] = v end
  for k = d + 1, #s do out[#out + 1] = s[k] end
  return y:reshape(out)
end

-- GatherND and ScatterND: the last dim of indices addresses the k dims after b batch dims; each
-- tuple becomes a (1-based) row of data viewed as {batch * prod(addressed dims), rest...}.
-- Returns the rows (flat), that view and the sizes of `rest`.
local function nd_rows(x, idx, b)
  local xs, is = x:shape(), idx:shape()
  local k = is[#is]
  local batch, addressed, rest = 1, 1, {}
  for d = 1, b do batch = batch * xs[d] end
  for d = b + 1, b + k do addressed = addressed * xs[d] end
  for d = b + k + 1, #xs do rest[#rest + 1] = xs[d] end
  local i = idx:to("int64"):reshape(batch, -1, k)
  local row = dle.zeros(i:size(1), i:size(2), {dtype = "int64"})
  for j = 1, k do
    local n = xs[b + j]
    local ij = i:select(3, j)
    row = row * n + dle.where(ij:lt(0), ij + n, ij)
  end
  row = row + dle.arange(0, batch, 1, {dtype = "int64"}):reshape(batch, 1) * addressed
  return row:reshape(-1) + 1, x:reshape(batch * addressed, table.unpack(rest)), rest
end

S.GatherND = function(ctx, x, idx)
  local rows, flat, rest = nd_rows(x, idx, ctx.a.batch_dims or 0)
  local is, out = idx:shape(), {}
  for d = 1, #is - 1 do out[d] = is[d] end
  for _, n in ipairs(rest) do out[#out + 1] = n end
  return flat:index_select(1, rows):reshape(out)
end

-- dle.scatter_reduce's names of ONNX's reductions (each including x's own value).
local SCATTER_REDUCE = {add = "sum", mul = "prod", max = "amax", min = "amin"}

-- ScatterND: each index tuple addresses a row of x viewed as {rows, rest...}; reduction "none"
-- (indices unique, as ONNX requires) writes where a scatter of ones reaches, "add" adds the
-- index_add of the updates, "mul", "max", "min" scatter_reduce the rows' updates into x.
S.ScatterND = function(ctx, x, idx, updates)
  local rows, flat = nd_rows(x, idx, 0)
  local upd = updates:reshape(rows:size(1), table.unpack(flat:shape(), 2))
  local reduction = ctx.a.reduction or "none"
  if reduction == "mul" or reduction == "max" or reduction == "min" then
    local view = {rows:size(1)}
    for d = 2, upd:dim() do view[d] = 1 end
    local at = rows:reshape(view):expand(upd:shape())
    return dle.scatter_reduce(flat, 1, at, upd, SCATTER_REDUCE[reduction]):reshape(x:shape())
  end
  local function add_at(src) return dle.zeros_like(flat):index_add(1, rows, src):reshape(x:shape()) end
  if reduction == "add" then return x + add_at(upd) end
  if reduction ~= "none" then U.fail(ctx, "reduction '" .. reduction .. "' is not supported") end
  return dle.where(add_at(dle.ones_like(upd)):ne(0), add_at(upd), x)
end

-- ScatterElements by dle's scatter ops: reduction "none" (the last write wins where ONNX leaves the
-- order of repeated indices open), "add", "mul", "max", "min"
S.ScatterElements = function(ctx, x, idx, updates)
  local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
  local i = idx:to("int64")
  i = dle.where(i:lt(0), i + x:size(d), i) + 1
  local reduction = ctx.a.reduction or "none"
  if reduction == "none" then return dle.scatter(x, d, i, updates) end
  local r = SCATTER_REDUCE[reduction] or U.fail(ctx, "reduction '" .. reduction .. "' is not supported")
  return dle.scatter_reduce(x, d, i, updates, r)
end
S.Scatter = S.ScatterElements

-- Compress and NonZero read their condition's values (data-dependent shapes).
S.Compress = function(ctx, x, cond)
  local keep = {}
  for i, v in ipairs(U.values(cond)) do
    if v then keep[#keep + 1] = i end
  end
  local src, d = x, 1
  if ctx.a.axis then
    d = U.dim(ctx, ctx.a.axis, x:dim())
  else
    src = x:reshape(-1)
  end
  local n = math.min(#keep, src:size(d))
  local idx = dle.tensor(keep, {dtype = "int64"}):reshape(#keep):narrow(1, 1, n)
  return src:index_select(d, idx)
end

S.NonZero = function(_, x)
  local shape, vals = x:shape(), x:reshape(-1):totable()
  local r = math.max(#shape, 1)
  local coords = {}
  for d = 1, r do coords[d] = {} end
  for flat, v in ipairs(vals) do
    if v ~= 0 and v ~= false then
      local rem = flat - 1
      for d = r, 1, -1 do
        local n = shape[d] or 1
        table.insert(coords[d], rem % n)
        rem = rem // n
      end
    end
  end
  local count = #coords[1]
  local out = dle.zeros(r, count, {dtype = "int64"})
  for d = 1, r do
    for j = 1, count do out[d][j] = coords[d][j] end
  end
  return out
end

-- ReverseSequence: a gather along the time axis whose index reverses each batch entry's first
-- sequence_lens[b] steps.
S.ReverseSequence = function(ctx, x, lens)
  local bd, td = U.dim(ctx, ctx.a.batch_axis or 1, x:dim()), U.dim(ctx, ctx.a.time_axis or 0, x:dim())
  local steps, l = x:size(td), U.ints(lens)
  local rows = {}
  for t = 1, steps do
    rows[t] = {}
    for b, n in ipairs(l) do rows[t][b] = t <= n and n - t + 1 or t end
  end
  local idx = dle.tensor(rows, {dtype = "int64"})
  if bd < td then idx = idx:t() end
  local shape = {}
  for d = 1, x:dim() do shape[d] = (d == bd or d == td) and x:size(d) or 1 end
  return x:gather(td, idx:reshape(shape):expand(x:shape()):contiguous())
end

S.GatherElements = function(ctx, x, idx)
  local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
  local i = idx:to("int64")
  i = dle.where(i:lt(0), i + x:size(d), i) + 1
  return x:gather(d, i)
end

-- The broadcast shape of two shapes (numpy rules).
local function broadcast_shape(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local x, y = a[i - n + #a] or 1, b[i - n + #b] or 1
    out[i] = x == 1 and y or x
  end
  return out
end

S.Expand = function(_, x, shape)
  local s = broadcast_shape(x:shape(), U.ints(shape))
  return x:expand(s):contiguous()
end

S.Tile = function(_, x, repeats)
  local reps = U.ints(repeats)
  local s = x:shape()
  -- {a, b} tiled {r1, r2}: view as {1, a, 1, b}, expand to {r1, a, r2, b}, merge pairs
  local view, big, out = {}, {}, {}
  for i, n in ipairs(s) do
    view[#view + 1] = 1; view[#view + 1] = n
    big[#big + 1] = reps[i]; big[#big + 1] = n
    out[i] = reps[i] * n
  end
  if #s == 0 then return x end
  return x:reshape(view):expand(big):reshape(out)
end

S.Constant = function(ctx)
  local a = ctx.a
  if a.value then return a.value end
  if a.value_float then return dle.tensor(a.value_float) end
  if a.value_floats then return dle.tensor(a.value_floats):reshape(#a.value_floats) end
  if a.value_int then return dle.tensor(a.value_int, {dtype = "int64"}) end
  if a.value_ints then return dle.tensor(a.value_ints, {dtype = "int64"}):reshape(#a.value_ints) end
  U.fail(ctx, "unsupported Constant value (sparse or string)")
end

S.ConstantOfShape = function(ctx, shape)
  local v = ctx.a.value
  local s = U.ints(shape)
  if not v then return dle.zeros(s) end
  return dle.full(s, U.scalar(v), {dtype = v:dtype()})
end

S.Range = function(_, start, limit, delta)
  local s, l, d = U.scalar(start), U.scalar(limit), U.scalar(delta)
  local n = math.max(math.ceil((l - s) / d), 0)
  -- start + i * delta, as ONNX defines it (not accumulated)
  return (dle.arange(0, n, 1, {dtype = "float64"}) * d + s):to(start:dtype())
end

-- The window functions: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1.
local function window(a0, a1, a2)
  return function(ctx, size)
    local n = math.floor(U.scalar(size))
    local denom = (ctx.a.periodic or 1) == 1 and n or n - 1
    local k = dle.arange(0, n, 1, {dtype = "float64"}) * (2 * math.pi / denom)
    local w = a0 - k:cos() * a1
    if a2 ~= 0 then w = w + (k * 2):cos() * a2 end
    return w:to(U.dtype(ctx, ctx.a.output_datatype or 1))
  end
end
S.HannWindow = window(0.5, 0.5, 0)
S.HammingWindow = window(25 / 46, 21 / 46, 0)
S.BlackmanWindow = window(0.42, 0.5, 0.08)

S.EyeLike = function(ctx, x)
  local k = ctx.a.k or 0
  local dt = ctx.a.dtype and U.dtype(ctx, ctx.a.dtype) or x:dtype()
  local n, m = x:size(1), x:size(2)
  local i = dle.arange(0, n, 1, {dtype = "int64"}):reshape(n, 1)
  local j = dle.arange(0, m, 1, {dtype = "int64"}):reshape(1, m)
  return (j - i):eq(k):to(dt)
end

S.Trilu = function(ctx, x, k)
  k = k and U.scalar(k) or 0
  if (ctx.a.upper or 1) == 1 then return x:triu(k) end
  return x:tril(k)
end

-- Dropout: the identity at inference (and an all-true mask); with training_mode true (opset 12+:
-- the third input) dle's dropout, whose random draws no other implementation reproduces.
S.Dropout = function(ctx, x, ratio, training)
  local p = ratio and U.scalar(ratio) or ctx.a.ratio or 0.5
  if training and U.scalar(training) and p > 0 then
    local mask = dle.rand(x:shape()):ge(p)
    return dle.where(mask, x / (1 - p), 0):to(x:dtype()), mask
  end
  return x, dle.ones(x:shape(), {dtype = "bool"})
end

-- Pad: "constant" concatenates blocks of the value; "edge" and "reflect" select the source
-- positions (clamped or mirrored) with index_select.
local function source_index(mode, n, before, after)
  local idx = {}
  for j = -before, n + after - 1 do
    local k
    if mode == "edge" then
      k = math.max(0, math.min(n - 1, j))
    elseif n > 1 then
      local period = 2 * (n - 1)
      k = j % period
      if k >= n then k = period - k end
    else
      k = 0
    end
    idx[#idx + 1] = k + 1
  end
  return idx
end

S.Pad = function(ctx, x, pads, value, axes)
  local mode = ctx.a.mode or "constant"
  local p, v
  if ctx.opset < 11 then
    p, v = ctx.a.pads, ctx.a.value or 0
  else
    p, v = U.ints(pads), value and U.scalar(value) or 0
  end
  local r = x:dim()
  local dims = {}
  if axes then
    dims = U.dims(ctx, U.ints(axes), r)
  else
    for d = 1, r do dims[d] = d end
  end
  local k = #dims
  for i, d in ipairs(dims) do
    local before, after = p[i], p[i + k]
    if mode == "constant" then
      x = U.pad_dim(x, d, before, after, v)
    elseif mode == "edge" or mode == "reflect" then
      if before ~= 0 or after ~= 0 then
        local idx = source_index(mode, x:size(d), before, after)
        x = x:index_select(d, dle.tensor(idx, {dtype = "int64"}):reshape(#idx))
      end
    else
      U.fail(ctx, "pad mode '" .. mode .. "' is not supported")
    end
  end
  return x
end

S.DepthToSpace = function(ctx, x)
  local b = ctx.a.blocksize
  local n, c, h, w = table.unpack(x:shape())
  local y
  if (ctx.a.mode or "DCR") == "DCR" then
    y = x:reshape(n, b, b, c // (b * b), h, w):permute(1, 4, 5, 2, 6, 3)
  else
    y = x:reshape(n, c // (b * b), b, b, h, w):permute(1, 2, 5, 3, 6, 4)
  end
  return y:reshape(n, c // (b * b), h * b, w * b)
end

S.SpaceToDepth = function(ctx, x)
  local b = ctx.a.blocksize
  local n, c, h, w = table.unpack(x:shape())
  return x:reshape(n, c, h // b, b, w // b, b):permute(1, 4, 6, 2, 3, 5):reshape(n, c * b * b, h // b, w // b)
end

S.Einsum = function(ctx, ...)
  return dle.einsum(ctx.a.equation:gsub("%s", ""), ...)
end

S.OneHot = function(ctx, idx, depth, values)
  local n = math.floor(U.scalar(depth))
  local i = idx:to("int64")
  i = dle.where(i:lt(0), i + n, i)
  local r = idx:dim() + 1
  local d = U.dim(ctx, ctx.a.axis or -1, r)
  local hot = dle.arange(0, n, 1, {dtype = "int64"})
  local shape = {}
  for k = 1, r do shape[k] = 1 end
  shape[d] = n
  local eq = i:unsqueeze(d):eq(hot:reshape(shape))
  local off, on = values:reshape(-1)[1], values:reshape(-1)[2]
  return dle.where(eq, on, off):to(values:dtype())
end

return S
