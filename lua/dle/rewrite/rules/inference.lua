--- dle.rewrite.rules.inference: rewrites for a model that no longer trains. They freeze values:
-- run them on graphs whose constants and parameters will not change (a deployed model), since
-- the folded tensors are computed once, at rewrite time.
--   fold_constants  an op whose inputs are all constants (no random op, no in-place write, no
--                   value written later) becomes a constant holding its result
--   conv_bn         conv2d(x, W[, c]) followed by eval-mode batch_norm (running statistics)
--                   becomes conv2d(x, W s, (c - mean) s + beta) with s = gamma / sqrt(var + eps)
--   linear_bn       matmul(x, Wt[, c]) over {N, in} followed by eval-mode batch_norm over {N, out}
--                   becomes matmul(x, Wt s, (c - mean) s + beta)
-- Folding happens only when every tensor folded is a constant or a parameter whose tensor does
-- not require grad (p:requires_grad_(false), or dle.no_grad models loaded for inference), and the
-- product's result has no other user. The folded tensors are computed in float64 and stored in
-- the weight's dtype.
local core = require("dle.core")
local P = require("dle.rewrite.pattern")
local B = require("dle.rewrite.build")
local Nodes = require("dle.graph.node")

local rule = require("dle.rewrite").rule
local op_ids = Nodes.op_ids

local rules = {}

-- The value of a node computed from constants alone (constants, frozen parameters, and views
-- of them), or nil.
local view_ops = {permute = true, view = true, expand = true, narrow = true, select = true}
local function frozen_value(n)
  local v = n:value()
  if v then
    if v.requires_grad or n.clobbered_by then return nil end
    return v
  end
  if view_ops[n.op] and not n.inplace and #n.inputs == 1 then
    local x = frozen_value(n.inputs[1])
    if not x then return nil end
    return core._graph_op(op_ids[n.op], core._graph_attrs(n.attrs), nil, true, x)
  end
  return nil
end

-- ---------------------------------------------------------------- constant folding

local unfoldable = {rand = true, randn = true, randint = true, dropout = true}

local function fold(m)
  local n = m.root
  if unfoldable[n.op] or n.clobbered_by or not n.op_id then return nil end
  local ins = {}
  for i, u in ipairs(n.inputs) do
    if u.op ~= "const" or u.clobbered_by then return nil end
    ins[i] = u:value()
  end
  local r = core._graph_op(n.op_id, next(n.attrs) and core._graph_attrs(n.attrs) or nil, nil, true,
                          table.unpack(ins))
  return B.const(r:contiguous())
end

-- One rule tried at every node (a P.any root): cheaper than one indexed rule per op of the table,
-- and one example checks it.
rules[#rules + 1] = rule{
  name = "inference.fold_constants",
  pattern = P.any(),
  replace = function(m)
    local n = m.root
    if #n.inputs == 0 or n.op == "fused" or n.op == "output" or n.op == "detach" then return nil end
    return fold(m)
  end,
  example = function()
    local dle = require("dle")
    local c = dle.randn(3, 4, {dtype = "float64"})
    return function(x) return x + (c * 2):exp():sum(2, true) end, {dle.randn(3, 4, {dtype = "float64"})}
  end,
}

-- ---------------------------------------------------------------- batch-norm folding

-- Eval-mode batch_norm's per-channel scale s and shift t (y = x s + t), as float64, or nil.
local function bn_affine(bn)
  local a = bn.attrs
  local ints = a.ints or {}
  if ints[1] ~= 0 then return nil end   -- training: batch statistics
  local has_w, has_b = ints[2] == 1, ints[3] == 1
  local k = 2
  local w, b
  if has_w then w = frozen_value(bn.inputs[k]); k = k + 1; if not w then return nil end end
  if has_b then b = frozen_value(bn.inputs[k]); k = k + 1; if not b then return nil end end
  local mean, var = bn.inputs[k] and frozen_value(bn.inputs[k]), bn.inputs[k + 1] and frozen_value(bn.inputs[k + 1])
  if not mean or not var then return nil end
  local eps = a.f and a.f[1] or 0
  local s = (var:double() + eps):rsqrt()
  if w then s = s * w:double() end
  local t = -mean:double() * s
  if b then t = t + b:double() end
  return s, t
end

-- batch_norm's input x is a node of op `op` (its other inputs are the affine and statistics
-- tensors): bound as m[name].
local function first_input(n, m, op, name)
  local x = n.inputs[1]
  if x and x.op == op and not x.inplace then
    m[name] = x
    return true
  end
  return false
end

local function single_use(n, m) return #m.users(n) == 1 and not m.is_output(n) end

-- The examples' networks (verify runs them): float64, frozen parameters, batch norms in eval mode
-- with random running statistics and affine parameters, so folding them changes real numbers.
local function frozen_eval_bn(net)
  local dle = require("dle")
  net:to("float64")
  for _, p in ipairs(net:parameters()) do p:requires_grad_(false) end
  dle.no_grad(function()
    for _, mod in ipairs(net:modules()) do
      if mod.running_mean then
        local c = mod.running_mean:numel()
        mod.running_mean:copy_(dle.randn(c, {dtype = "float64"}))
        mod.running_var:copy_(dle.rand(c, {dtype = "float64"}) + 0.5)
        if mod.weight then mod.weight:copy_(dle.randn(c, {dtype = "float64"})) end
        if mod.bias then mod.bias:copy_(dle.randn(c, {dtype = "float64"})) end
      end
    end
  end)
  net:eval()
end

rules[#rules + 1] = rule{
  name = "inference.conv_bn",
  pattern = P.batch_norm({where = function(n, m) return first_input(n, m, "conv2d", "conv") end}),
  replace = function(m)
    local bn, conv = m.root, m.conv
    if not single_use(conv, m) then return nil end
    local s, t = bn_affine(bn)
    if not s then return nil end
    local W = frozen_value(conv.inputs[2])
    local c = conv.inputs[3] and frozen_value(conv.inputs[3])
    if not W or (conv.inputs[3] and not c) or W:dim() ~= 4 or s:numel() ~= W:size(1) then return nil end
    local dt = W:dtype()
    local W2 = (W:double() * s:view(-1, 1, 1, 1)):to(dt)
    local c2 = t
    if c then c2 = c2 + c:double() * s end
    return B.conv2d(conv.inputs[1], B.const(W2), B.const(c2:to(dt)), conv.attrs)
  end,
  example = function()
    local dle = require("dle")
    local net = dle.nn.Sequential(dle.nn.Conv2d(2, 3, 3, {padding = 1}), dle.nn.BatchNorm2d(3))
    frozen_eval_bn(net)
    return function(x) return net(x) end, {dle.randn(2, 2, 5, 5, {dtype = "float64"})}
  end,
}

rules[#rules + 1] = rule{
  name = "inference.linear_bn",
  pattern = P.batch_norm({where = function(n, m) return first_input(n, m, "matmul", "mm") end}),
  replace = function(m)
    local bn, mm = m.root, m.mm
    if not single_use(mm, m) or #mm._shape ~= 2 or #mm.inputs < 2 then return nil end
    local s, t = bn_affine(bn)
    if not s then return nil end
    local Wt = frozen_value(mm.inputs[2])
    local c = mm.inputs[3] and frozen_value(mm.inputs[3])
    if not Wt or (mm.inputs[3] and not c) or Wt:dim() ~= 2 or s:numel() ~= Wt:size(2) then return nil end
    if c and c:dim() ~= 1 then return nil end
    local dt = Wt:dtype()
    local W2 = (Wt:double() * s:view(1, -1)):to(dt)
    local c2 = t
    if c then c2 = c2 + c:double() * s end
    return B.matmul(mm.inputs[1], B.const(W2), B.const(c2:to(dt)))
  end,
  example = function()
    local dle = require("dle")
    local net = dle.nn.Sequential(dle.nn.Linear(4, 3), dle.nn.BatchNorm1d(3))
    frozen_eval_bn(net)
    return function(x) return net(x) end, {dle.randn(5, 4, {dtype = "float64"})}
  end,
}

return rules
