--- dle.rewrite.rules.algebra: identities that remove work, and merging products that share an
-- input.
--   x*1, 1*x, x+0, 0+x, x-0, x/1, x^1 -> x      only where x already has the result's shape and
--                                              dtype (a broadcast or a promotion is real work)
--   neg(neg(x)) -> x
--   permute(permute(x)) -> x                   when the two orders cancel (double transpose)
--   matmul(x, W1[, b1]), matmul(x, W2[, b2]), ... (same x, 2-D weights of the same rows, all with
--   or all without bias) -> one matmul(x, cat(W1, W2, ...)[, cat(b1, b2, ...)]) and a narrow of it
--   per product: the Q, K, V projections of attention as one GEMM. The concatenation is a node
--   of the graph (recomputed each replay: parameters stay live and keep their gradients). Skipped
--   when a user of a product views it in a way the narrowed (strided) result cannot be viewed.
local core = require("dle.core")
local P = require("dle.rewrite.pattern")
local B = require("dle.rewrite.build")
local Nodes = require("dle.graph.node")

local rule = require("dle.rewrite").rule

local function same_shape(a, b)
  local sa, sb = a._shape, b._shape
  if #sa ~= #sb or a._dtype ~= b._dtype then return false end
  for i = 1, #sa do
    if sa[i] ~= sb[i] then return false end
  end
  return true
end

-- x when it already is the root's value (shape and dtype), else nil (declined).
local function keep_x(m)
  if same_shape(m.x, m.root) then return m.x end
  return nil
end

local rules = {}

local function identity(name, pattern, example)
  rules[#rules + 1] = rule{name = name, pattern = pattern, replace = keep_x, example = example}
end

identity("algebra.mul_one", P.mul(P.any "x", P.const(1)))
identity("algebra.one_mul", P.mul(P.const(1), P.any "x"))
identity("algebra.add_zero", P.add(P.any "x", P.const(0)))
identity("algebra.zero_add", P.add(P.const(0), P.any "x"))
identity("algebra.sub_zero", P.sub(P.any "x", P.const(0)))
identity("algebra.div_one", P.div(P.any "x", P.const(1)))
identity("algebra.pow_one", P.pow_scalar(P.any "x", {where = function(n) return n.attrs.f and n.attrs.f[1] == 1 end,
                                                      attrs = {f = {1, 0}}}))
identity("algebra.neg_neg", P.neg(P.neg(P.any "x")))

-- permute's attrs.ints is the order of source dims (0-based); two cancel when composing them
-- gives the identity.
local function cancels(outer, inner)
  local a, b = outer.attrs.ints or {}, inner.attrs.ints or {}
  if #a ~= #b then return false end
  for i = 1, #a do
    if b[a[i] + 1] ~= i - 1 then return false end
  end
  return true
end

rules[#rules + 1] = rule{
  name = "algebra.permute_cancel",
  pattern = P.permute(P.permute(P.any "x", {name = "inner"}),
                      {where = function(n, m) return cancels(n, m.inner) end}),
  replace = keep_x,
  example = function()
    local dle = require("dle")
    return function(x) return x:permute(3, 1, 2):permute(2, 3, 1) end, {dle.randn(2, 3, 4, {dtype = "float64"})}
  end,
}

-- ---------------------------------------------------------------- common views

-- Two views of one node with the same op and attrs are one value (Linear layers each reshape
-- their shared input): the later becomes the earlier, so products of the same view can merge.
local function same_attrs(a, b) return P.attrs_match(a, b) and P.attrs_match(b, a) end

local function common_view(m)
  local n = m.root
  if #n.inputs ~= 1 then return nil end
  for _, u in ipairs(m.users(n.inputs[1])) do
    if u ~= n and u.op == n.op and not u.inplace and u.id < n.id and #u.inputs == 1 and
       same_attrs(u.attrs, n.attrs) and (u.no_grad or false) == (n.no_grad or false) then
      return u
    end
  end
  return nil
end

for _, op in ipairs({"view", "permute", "narrow", "select", "expand"}) do
  rules[#rules + 1] = rule{name = "algebra.common_view", pattern = P.op(op, P.any "x"), replace = common_view,
    example = function()
      local dle = require("dle")
      local views = {view = function(x) return x:view(12) end, permute = function(x) return x:t() end,
                     narrow = function(x) return x:narrow(2, 2, 2) end, select = function(x) return x[2] end,
                     expand = function(x) return x:expand(2, 3, 4) end}
      return function(x) return views[op](x) * views[op](x):exp() end, {dle.randn(3, 4, {dtype = "float64"})}
    end}
end

-- ---------------------------------------------------------------- merging products

-- Products merged so far in the graph being rewritten: graph -> {product node -> replacement}.
local merged = setmetatable({}, {__mode = "k"})

-- The siblings of product p: matmuls reading the same first input, with a 2-D weight of the same
-- rows and dtype, and a bias exactly when p has one.
local function siblings(p, users)
  local x, w = p.inputs[1], p.inputs[2]
  if #w._shape ~= 2 or #x._shape < 1 then return nil end
  local list = {}
  for _, u in ipairs(users(x)) do
    if u.op == "matmul" and not u.inplace and u.inputs[1] == x and u.inputs[2] ~= x and
       #u.inputs == #p.inputs and u._dtype == p._dtype then
      local uw = u.inputs[2]
      local ok = #uw._shape == 2 and uw._shape[1] == w._shape[1] and uw._dtype == w._dtype
      if ok and #u.inputs == 3 then
        local b = u.inputs[3]
        ok = #b._shape == 1 and b._shape[1] == uw._shape[2] and b._dtype == u.inputs[3]._dtype
      end
      local seen = false
      for _, v in ipairs(list) do seen = seen or v == u end
      if ok and not seen then list[#list + 1] = u end
    end
  end
  if #list < 2 then return nil end
  return list
end

-- Whether every user of every product can read the narrowed result: views are tried on a
-- stand-in narrowed tensor (metadata only).
local function views_fit(list, total, users)
  local dle = require("dle")
  local x = list[1]
  local shape = {table.unpack(x._shape)}
  shape[#shape] = total
  local base = core.empty(shape, {dtype = x._dtype})
  local off = 0
  for _, p in ipairs(list) do
    local n = p._shape[#p._shape]
    local part = base:narrow(#shape, off + 1, n)
    for _, u in ipairs(users(p)) do
      if u.op == "view" then
        local ok = pcall(core._graph_op, Nodes.op_ids.view, core._graph_attrs(u.attrs), nil, true, part)
        if not ok then return false end
      end
    end
    off = off + n
  end
  return dle ~= nil
end

rules[#rules + 1] = rule{
  name = "algebra.merge_matmuls",
  pattern = P.matmul(),
  replace = function(m)
    local p = m.root
    local done = merged[m.graph]
    if done and done[p] then return done[p] end
    if #p.inputs < 2 or #p.inputs > 3 then return nil end
    local list = siblings(p, m.users)
    if not list then return nil end
    local total = 0
    for _, u in ipairs(list) do total = total + u.inputs[2]._shape[2] end
    if not views_fit(list, total, m.users) then return nil end
    local ws, bs = {}, {}
    for i, u in ipairs(list) do
      ws[i] = u.inputs[2]
      bs[i] = u.inputs[3]
    end
    ws[#ws + 1] = {ints = {1}}
    local w = B.cat(table.unpack(ws))
    local prod
    if #p.inputs == 3 then
      bs[#bs + 1] = {ints = {0}}
      prod = B.matmul(p.inputs[1], w, B.cat(table.unpack(bs)))
    else
      prod = B.matmul(p.inputs[1], w)
    end
    local last = #prod._shape - 1
    done = done or {}
    merged[m.graph] = done
    local off = 0
    for _, u in ipairs(list) do
      local n = u.inputs[2]._shape[2]
      done[u] = B.narrow(prod, {ints = {last, off, n}})
      off = off + n
    end
    return done[p]
  end,
  example = function()
    local dle = require("dle")
    local opts = {dtype = "float64"}
    local wq, wk, wv = dle.randn(6, 4, opts), dle.randn(6, 4, opts), dle.randn(6, 3, opts)
    local bq, bk, bv = dle.randn(4, opts), dle.randn(4, opts), dle.randn(3, opts)
    return function(x)
      local q, k, v = dle.addmm(bq, x, wq), dle.addmm(bk, x, wk), dle.addmm(bv, x, wv)
      return q:matmul(k:t()):softmax(-1):matmul(v)
    end, {dle.randn(5, 6, opts)}
  end,
}

return rules
