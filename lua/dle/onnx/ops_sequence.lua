--- dle.onnx.ops_sequence: ONNX's sequence ops (Lua lists of tensors, dle.onnx.values) and its
-- optional ops. Positions are read into Lua (a sequence's length is a Lua number anyway); every
-- bad argument (not a sequence, wrong dtype, position out of range) is a U.fail naming the node.
local dle = require("dle")
local U = require("dle.onnx.util")
local V = require("dle.onnx.values")

local S = {}

local function sequence_arg(ctx, v, what)
  if not V.is_sequence(v) then U.fail(ctx, ("%s must be a sequence, got %s"):format(what, V.describe(v))) end
  return v
end

local function tensor_arg(ctx, v, what)
  if not dle.is_tensor(v) then U.fail(ctx, ("%s must be a tensor, got %s"):format(what, V.describe(v))) end
  return v
end

-- The tensors of a sequence share one dtype.
local function same_dtype(ctx, seq, x)
  if seq[1] and seq[1]:dtype() ~= x:dtype() then
    U.fail(ctx, ("tensor of dtype %s in a sequence of %s"):format(x:dtype(), seq[1]:dtype()))
  end
end

local function copy(seq) return V.sequence(table.move(seq, 1, #seq, 1, {})) end

-- The 1-based index of ONNX position p (a one-element integer tensor, negative from the end) in a
-- sequence of n; `past_end` allows n (insertion after the last element).
local function position(ctx, p, n, past_end)
  tensor_arg(ctx, p, "position")
  if p:numel() ~= 1 or p:is_floating_point() or p:dtype() == "bool" then
    U.fail(ctx, ("position must be one integer, got %s"):format(V.describe(p)))
  end
  local i = math.tointeger(U.scalar(p))
  local hi = past_end and n or n - 1
  if i < -n or i > hi then
    U.fail(ctx, ("position %d is out of range for a sequence of length %d (%d to %d)"):format(i, n, -n, hi))
  end
  return (i < 0 and i + n or i) + 1
end

S.SequenceEmpty = function(ctx)
  U.dtype(ctx, ctx.a.dtype or 1)   -- an unsupported element type is refused here
  return V.sequence({})
end

S.SequenceConstruct = function(ctx, ...)
  local seq = V.sequence({})
  for i = 1, select("#", ...) do
    local x = tensor_arg(ctx, (select(i, ...)), "input " .. i)
    same_dtype(ctx, seq, x)
    seq[i] = x
  end
  return seq
end

S.SequenceLength = function(ctx, seq)
  return dle.tensor(#sequence_arg(ctx, seq, "input"), {dtype = "int64"})
end

S.SequenceAt = function(ctx, seq, p)
  sequence_arg(ctx, seq, "input")
  return seq[position(ctx, p, #seq, false)]
end

S.SequenceInsert = function(ctx, seq, x, p)
  sequence_arg(ctx, seq, "input")
  tensor_arg(ctx, x, "tensor")
  same_dtype(ctx, seq, x)
  local out = copy(seq)
  table.insert(out, p and position(ctx, p, #seq, true) or #seq + 1, x)
  return out
end

S.SequenceErase = function(ctx, seq, p)
  sequence_arg(ctx, seq, "input")
  if #seq == 0 then U.fail(ctx, "cannot erase from an empty sequence") end
  local out = copy(seq)
  table.remove(out, p and position(ctx, p, #seq, false) or #seq)
  return out
end

-- ConcatFromSequence: concatenated along axis, or stacked along a new axis (new_axis = 1).
S.ConcatFromSequence = function(ctx, seq)
  sequence_arg(ctx, seq, "input")
  if #seq == 0 then U.fail(ctx, "cannot concatenate an empty sequence") end
  local axis = ctx.a.axis or U.fail(ctx, "attribute 'axis' is required")
  local stack = (ctx.a.new_axis or 0) == 1
  local d = U.dim(ctx, axis, seq[1]:dim() + (stack and 1 or 0))
  return (stack and dle.stack or dle.cat)(seq, d)   -- its shape errors get the node's name
end

-- SplitToSequence: pieces of `split` (a scalar: that size, the last one smaller; a list: those
-- sizes) along axis, or pieces of 1 with the axis removed unless keepdims.
S.SplitToSequence = function(ctx, x, split)
  tensor_arg(ctx, x, "input")
  local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
  local n = x:size(d)
  local sizes = {}
  if split == nil then
    for i = 1, n do sizes[i] = 1 end
  elseif split:dim() == 0 then
    local k = math.tointeger(U.scalar(split))
    if k < 1 then U.fail(ctx, ("split must be positive, got %d"):format(k)) end
    for at = 0, n - 1, k do sizes[#sizes + 1] = math.min(k, n - at) end
  else
    local total = 0
    for i, k in ipairs(U.ints(split)) do
      if k < 0 then U.fail(ctx, ("split sizes must not be negative, got %d"):format(k)) end
      sizes[i], total = k, total + k
    end
    if total ~= n then
      U.fail(ctx, ("split sizes add up to %d, but dim %d of input %s has %d"):format(total, d, V.describe(x), n))
    end
  end
  local squeeze = split == nil and (ctx.a.keepdims or 1) == 0
  local out, at = V.sequence({}), 1
  for i, k in ipairs(sizes) do
    local piece = x:narrow(d, at, k)
    out[i] = squeeze and piece:squeeze(d) or piece
    at = at + k
  end
  return out
end

-- SequenceMap: the body runs once per position of the sequences; a tensor input is given to
-- every run as it is; the body's outputs are collected into sequences.
S.SequenceMap = function(ctx, ...)
  local args = table.pack(...)
  local n = #sequence_arg(ctx, args[1], "input 1")
  for i = 2, args.n do
    local v = args[i]
    if V.is_sequence(v) and #v ~= n then
      U.fail(ctx, ("input %d is a sequence of %d, input 1 of %d"):format(i, #v, n))
    elseif not V.is_sequence(v) then
      tensor_arg(ctx, v, "input " .. i)
    end
  end
  local outs = {}
  for k = 1, #ctx.node.outputs do outs[k] = V.sequence({}) end
  for pos = 1, n do
    local ins = {}
    for i = 1, args.n do ins[i] = V.is_sequence(args[i]) and args[i][pos] or args[i] end
    local r = ctx.run(ctx.a.body, ins)
    for k = 1, #outs do
      outs[k][pos] = tensor_arg(ctx, r[k], "body output " .. k)
    end
  end
  return table.unpack(outs)
end

-- Optional(x) holds x; Optional() is the empty optional (its element type does not matter here).
S.Optional = function(_, x)
  if x == nil then return V.NONE end
  return x
end

S.OptionalHasElement = function(_, x)
  return dle.tensor(x ~= nil and x ~= V.NONE, {dtype = "bool"})
end

S.OptionalGetElement = function(ctx, x)
  if x == nil or x == V.NONE then U.fail(ctx, "the optional is empty") end
  return x
end

return S
