--- dle.rewrite.discover: rewrite rules found by search (the seeds' TASO-style optimisation), not
-- written by hand.
--   local rules, report = dle.rewrite.discover{ops = {"add", "mul", "neg", "sub"}, max_nodes = 2,
--                                               constants = {0, 1}, path = "my_rules.lua"}
--   local g2 = dle.rewrite.apply(g, rules)
-- 1. Enumerate every expression of at most max_nodes ops (from `ops`: elementwise unary and binary
--    ops of the op table) over the input variables x, y (`inputs`) and the scalar constants.
-- 2. Fingerprint each on random float64 inputs of both signs (expressions giving NaN or inf there
--    are dropped: their domain is narrower than the search can check) and group the equal ones.
-- 3. In each group, the cheapest expression by the cost model (per op: FLOPs, weighted by the
--    op's cost per element, plus its elements read and written) is the canonical one; every
--    other member whose subexpressions are all canonical (TASO's pruning: the others are caught by
--    a smaller rule) and that uses the same variables becomes a rule member -> canonical.
-- 4. Each rule is checked on new random inputs in float64 (dle.rewrite.verify) and, when all its
--    ops are exact on integers, on random int64 inputs for exact equality; failures are dropped.
-- 5. The rules are written as a Lua rule file (path, atomically) that `dofile` or `require` loads
--    back as a rule list; discover returns that list (loaded from the source it wrote) and a
--    report {expressions, classes, candidates, rules, rejected = {name = reason}}.
local dle = require("dle")
local check = require("dle.check")
local Nodes = require("dle.graph.node")

-- cost per element of one op, beyond reading its inputs and writing its result
local WEIGHT = {add = 1, sub = 1, mul = 1, neg = 1, abs = 1, relu = 1, maximum = 1, minimum = 1, div = 4,
                reciprocal = 4, sqrt = 4, rsqrt = 4}
local HEAVY = 20 -- exp, log, tanh, sigmoid, sin, ...
local EXACT_ON_INTEGERS = {add = true, sub = true, mul = true, neg = true, abs = true, maximum = true,
                           minimum = true, relu = true}

local function key_of(e)
  if e.var then return e.var end
  if e.const then return string.format("%g", e.const) end
  local parts = {}
  for i, a in ipairs(e.args) do parts[i] = key_of(a) end
  return e.op .. "(" .. table.concat(parts, ",") .. ")"
end

local function cost(e)
  if not e.op then return 0 end
  local c = (WEIGHT[e.op] or HEAVY) + #e.args + 1
  for _, a in ipairs(e.args) do c = c + cost(a) end
  return c
end

local function vars_of(e, out)
  out = out or {}
  if e.var then out[e.var] = true end
  for _, a in ipairs(e.args or {}) do vars_of(a, out) end
  return out
end

local function same_set(a, b)
  for k in pairs(a) do if not b[k] then return false end end
  for k in pairs(b) do if not a[k] then return false end end
  return true
end

-- The value of e with the variables bound to tensors in env.
local function eval(e, env, dtype)
  if e.var then return env[e.var] end
  if e.const then return dle.full({}, e.const, {dtype = dtype}) end
  local args = {}
  for i, a in ipairs(e.args) do args[i] = eval(a, env, dtype) end
  return dle[e.op](table.unpack(args))
end

-- Lua source of a pattern for e (variables as P.any, constants as P.const).
local function pattern_src(e)
  if e.var then return string.format("P.any %q", e.var) end
  if e.const then return string.format("P.const(%s)", string.format("%.17g", e.const)) end
  local parts = {}
  for i, a in ipairs(e.args) do parts[i] = pattern_src(a) end
  return string.format("P.op(%q, %s)", e.op, table.concat(parts, ", "))
end

-- Lua source of the replacement's node (m is the match).
local function build_src(e)
  if e.var then return "m." .. e.var end
  if e.const then return string.format("const(m, %.17g)", e.const) end
  local parts = {}
  for i, a in ipairs(e.args) do parts[i] = build_src(a) end
  return string.format("B.make(%q, {%s})", e.op, table.concat(parts, ", "))
end

-- Whether pattern expression p matches expression e at its root (variables binding subexpressions
-- consistently): e is then an instance of p.
local function instance_of(p, e, b)
  b = b or {}
  if p.var then
    if b[p.var] then return b[p.var].key == e.key end
    b[p.var] = e
    return true
  end
  if p.const then return e.const == p.const end
  if p.op ~= e.op or #p.args ~= #(e.args or {}) then return false end
  for i, a in ipairs(p.args) do
    if not instance_of(a, e.args[i], b) then return false end
  end
  return true
end

-- The variables in order of first appearance are x, y, z (one rule per renaming).
local function vars_in_order(e)
  local seen, next_name = {}, {"x", "y", "z"}
  local n, ok = 0, true
  local function walk(t)
    if t.var and not seen[t.var] then
      n = n + 1
      seen[t.var] = true
      if t.var ~= next_name[n] then ok = false end
    end
    for _, a in ipairs(t.args or {}) do walk(a) end
  end
  walk(e)
  return ok
end

local function all_ops_exact(e)
  if not e.op then return true end
  if not EXACT_ON_INTEGERS[e.op] then return false end
  for _, a in ipairs(e.args) do if not all_ops_exact(a) then return false end end
  return true
end

--- dle.rewrite.discover(opts) -> rules, report (see the header).
-- @param opts {ops = list of op names (required), max_nodes = 2, inputs = 2 (x, y; at most 3),
--   constants = {} (numbers), path = a file for the rule set (optional), trials = 3, max_rules}
local function discover(opts)
  opts = check.options(opts, "rewrite.discover", {"ops", "max_nodes", "inputs", "constants", "path", "trials",
                                                 "max_rules"})
  if type(opts.ops) ~= "table" or #opts.ops == 0 then
    check.error("rewrite.discover: ops must be a non-empty list of op names")
  end
  local max_nodes, nvars = opts.max_nodes or 2, opts.inputs or 2
  if math.type(max_nodes) ~= "integer" or max_nodes < 1 or max_nodes > 4 then
    check.error("rewrite.discover: max_nodes must be an integer from 1 to 4, got " .. tostring(max_nodes))
  end
  if math.type(nvars) ~= "integer" or nvars < 1 or nvars > 3 then
    check.error("rewrite.discover: inputs must be 1, 2 or 3, got " .. tostring(nvars))
  end
  local unary, binary = {}, {}
  for _, op in ipairs(opts.ops) do
    local info = Nodes.op_infos[op]
    if not info or (info.kind ~= "unary" and info.kind ~= "binary") or type(dle[op]) ~= "function" then
      check.error("rewrite.discover: " .. tostring(op) .. " is not an elementwise unary or binary op of the table")
    end
    if info.kind == "unary" then unary[#unary + 1] = op else binary[#binary + 1] = op end
  end
  -- 1. enumeration by number of ops
  local leaves = {}
  for i = 1, nvars do leaves[#leaves + 1] = {var = ({"x", "y", "z"})[i]} end
  for _, c in ipairs(opts.constants or {}) do
    if type(c) ~= "number" then check.error("rewrite.discover: constants must be numbers") end
    leaves[#leaves + 1] = {const = c}
  end
  local by_size = {[0] = leaves}
  for s = 1, max_nodes do
    local list = {}
    for _, op in ipairs(unary) do
      for _, a in ipairs(by_size[s - 1]) do list[#list + 1] = {op = op, args = {a}} end
    end
    for _, op in ipairs(binary) do
      for i = 0, s - 1 do
        for _, a in ipairs(by_size[i]) do
          for _, b in ipairs(by_size[s - 1 - i]) do list[#list + 1] = {op = op, args = {a, b}} end
        end
      end
    end
    by_size[s] = list
  end
  -- 2. fingerprints on two random input sets (both signs, magnitudes around 1)
  local g = dle.Generator(20261128)
  local envs = {}
  for k = 1, 2 do
    envs[k] = {}
    for _, l in ipairs(leaves) do
      if l.var then envs[k][l.var] = dle.randn(16, {dtype = "float64", generator = g}) * 1.7 end
    end
  end
  local classes, order, report = {}, {}, {expressions = 0, classes = 0, candidates = 0, rules = 0, rejected = {}}
  local function values(e, env)
    local ok, v = pcall(eval, e, env, "float64")
    if not ok or not v:isfinite():all():item() then return nil end
    if v:dim() == 0 then v = v:expand(16) end
    return v
  end
  for s = 0, max_nodes do
    for _, e in ipairs(by_size[s]) do
      e.key, e.cost, e.size = key_of(e), cost(e), s
      local v = values(e, envs[1])
      if v then
        report.expressions = report.expressions + 1
        local parts = {}
        for i, x in ipairs(v:totable()) do parts[i] = string.format("%.9g", x + 0.0) end
        local fp = table.concat(parts, " ")
        if not classes[fp] then classes[fp] = {}; order[#order + 1] = fp end
        table.insert(classes[fp], e)
        e.class = fp
      end
    end
  end
  -- 3. canonical members and candidate rules
  local canonical = {}
  for _, fp in ipairs(order) do
    local members = classes[fp]
    table.sort(members, function(a, b)
      if a.cost ~= b.cost then return a.cost < b.cost end
      if a.size ~= b.size then return a.size < b.size end
      return a.key < b.key
    end)
    canonical[fp] = members[1]
    if #members > 1 then report.classes = report.classes + 1 end
  end
  -- every op subexpression canonical, and none made of constants only (constant folding's job)
  local function children_canonical(e)
    for _, a in ipairs(e.args or {}) do
      if a.op and (not a.class or canonical[a.class] ~= a or next(vars_of(a)) == nil) then return false end
    end
    return true
  end
  local src = {"-- Rewrite rules found by dle.rewrite.discover (lua/dle/rewrite/discover.lua); regenerate",
               "-- rather than edit. Each maps an expression to a cheaper equivalent one.",
               'local rewrite = require("dle.rewrite")',
               "local P, B = rewrite.pattern, rewrite.build",
               'local core = require("dle.core")',
               "local function const(m, v) return B.const(core.full({}, v, {dtype = m.root:dtype()})) end",
               "return {"}
  local chosen, n = {}, 0
  for _, fp in ipairs(order) do
    local c = canonical[fp]
    for _, e in ipairs(classes[fp]) do
      local ok = e ~= c and e.op and e.cost > c.cost and children_canonical(e) and next(vars_of(e)) ~= nil
                 and same_set(vars_of(e), vars_of(c)) and vars_in_order(e)
      -- the second input set must agree too (a fingerprint collision otherwise)
      if ok then
        local a, b = values(e, envs[2]), values(c, envs[2])
        ok = a and b and ((a - b):abs() - (b:abs() * 1e-12 + 1e-12)):amax():item() <= 0
      end
      if ok and (not opts.max_rules or n < opts.max_rules) then
        local name = "discovered: " .. e.key .. " -> " .. c.key
        local body = string.format("  rewrite.rule{name = %q, pattern = %s,\n    replace = function(m) return %s end},",
                                   name, pattern_src(e), build_src(c))
        chosen[#chosen + 1] = {name = name, body = body, lhs = e, rhs = c}
        n = n + 1
      end
    end
  end
  -- 4. smallest first; a candidate that is an instance of a kept rule's left side is redundant;
  -- verification in float64 by verify and exactly on int64 where every op is exact
  table.sort(chosen, function(a, b)
    if a.lhs.size ~= b.lhs.size then return a.lhs.size < b.lhs.size end
    return a.name < b.name
  end)
  local kept = {}
  for _, r in ipairs(chosen) do
    local redundant = false
    for _, k in ipairs(kept) do
      if instance_of(k.lhs, r.lhs) then redundant = true; break end
    end
    if redundant then goto continue end
    local chunk = assert(load(table.concat({src[3], src[4], src[5], src[6], "return {", r.body, "}"}, "\n"),
                         "=discovered", "t"))
    local rule = chunk()[1]
    local ok, _, why = require("dle.rewrite").verify(rule, {trials = opts.trials or 3, tol = 1e-9})
    if ok and all_ops_exact(r.lhs) and all_ops_exact(r.rhs) then
      local env = {}
      for v in pairs(vars_of(r.lhs)) do env[v] = dle.randint(-50, 50, {32}, {dtype = "int64", generator = g}) end
      local a, b = eval(r.lhs, env, "int64"), eval(r.rhs, env, "int64")
      if a:dim() == 0 then a = a:expand(32) end
      if b:dim() == 0 then b = b:expand(32) end
      if not a:eq(b):all():item() then ok, why = false, "differs on int64 inputs" end
    end
    if ok then kept[#kept + 1] = r else report.rejected[r.name] = why or "verify failed" end
    ::continue::
  end
  report.candidates = #chosen
  for _, r in ipairs(kept) do src[#src + 1] = r.body end
  src[#src + 1] = "}"
  local text = table.concat(src, "\n") .. "\n"
  report.rules = #kept
  if opts.path then
    check.string(opts.path, "rewrite.discover", "path")
    require("dle.io.atomic").write("rewrite.discover", opts.path, function(f) f:write(text) end)
  end
  local rules = assert(load(text, "=" .. (opts.path or "discovered rules"), "t"))()
  return rules, report, text
end

return discover
