--- dle.rewrite: rewrite rules over traced graphs (tinygrad-style: every transformation is a rule
-- held as data, a pattern plus a replacement callback).
--
--   local P, B = dle.rewrite.pattern, dle.rewrite.build
--   local twice = dle.rewrite.rule{name = "x*2 -> x+x", pattern = P.mul(P.any "x", P.const(2)),
--                                  replace = function(m) return B.add(m.x, m.x) end}
--   local g2, counts = dle.rewrite.apply(g, {twice})        -- counts["x*2 -> x+x"] == 1
--   print(dle.rewrite.verify(twice, {trials = 5}))          --> true  0
--   dle.rewrite.apply(g, dle.rewrite.rules.algebra)          -- built-in sets: algebra, fusion, inference
--
-- apply copies the graph, then repeats passes over its nodes in order until a pass changes
-- nothing (a fixed point). At each node only the rules whose pattern's root is that node's op are
-- tried (rules are indexed by root op; a P.any root is tried everywhere), in the order given; the
-- first whose replace returns a node other than the root replaces the root in every use (and
-- in the outputs), then dead nodes are dropped after the pass. A replacement must have the root's
-- shape and dtype (an error naming the rule otherwise). Replacements that would read a value
-- after an in-place write overwrote it, and roots with a second result in use, are skipped. After
-- max_passes (100) passes without settling, apply raises an error naming the rules still firing.
-- Control-flow nodes (cond, while_loop, scan) are left as they are; their subgraphs are rewritten
-- with the same rules (their counts added in).
-- DLE_DEBUG=2 prints every rewrite on stderr.
local core = require("dle.core")
local check = require("dle.check")
local P = require("dle.rewrite.pattern")
local B = require("dle.rewrite.build")
local Nodes = require("dle.graph.node")

local Node = Nodes.Node

local rewrite = {pattern = P, build = B}

local debug_level = tonumber(os.getenv("DLE_DEBUG") or "") or 0

local Rule = {}
Rule.__index = Rule
Rule.__tostring = function(r) return "dle.rewrite.Rule(" .. r.name .. ")" end

--- dle.rewrite.rule{name = ..., pattern = ..., replace = function(match) ... end[, example]} ->
-- a rule. replace gets the match (bindings by name, match.root the matched node, match.graph the
-- graph being rewritten, match.users(node) its users) and returns a node or nil to decline.
-- example (optional, for verify): function(trial) -> fn, inputs... : a function whose trace
-- contains the pattern, and example inputs for it.
function rewrite.rule(spec)
  if type(spec) ~= "table" then
    check.error("rewrite.rule: expected a table {name, pattern, replace}, got " .. type(spec))
  end
  if type(spec.name) ~= "string" or spec.name == "" then
    check.error("rewrite.rule: name must be a non-empty string, got " .. check.typename(spec.name))
  end
  if not P.is_pattern(spec.pattern) then
    check.error("rewrite.rule: rule '" .. spec.name .. "': pattern must be a pattern (P.any, P.const, P.<op>), got "
          .. check.typename(spec.pattern))
  end
  if not check.is_callable(spec.replace) then
    check.error("rewrite.rule: rule '" .. spec.name .. "': replace must be a function, got " .. type(spec.replace))
  end
  if spec.example ~= nil and not check.is_callable(spec.example) then
    check.error("rewrite.rule: rule '" .. spec.name .. "': example must be a function, got " .. type(spec.example))
  end
  return setmetatable({name = spec.name, pattern = spec.pattern, replace = spec.replace,
                       example = spec.example, root = P.root_op(spec.pattern)}, Rule)
end

--- rewrite.is_rule(v) -> whether v is a rule.
function rewrite.is_rule(v) return getmetatable(v) == Rule end

-- A rule, a list of rules, or a list of lists (rule sets) as one flat list.
local function flatten(rules, out, fname)
  out = out or {}
  if getmetatable(rules) == Rule then
    out[#out + 1] = rules
  elseif type(rules) == "table" then
    for i, r in ipairs(rules) do
      if getmetatable(r) ~= Rule and type(r) ~= "table" then
        check.error(string.format("%s: rules[%d] must be a rule or a list of rules, got %s", fname, i, type(r)))
      end
      flatten(r, out, fname)
    end
  else
    check.error(fname .. ": rules must be a rule or a list of rules, got " .. type(rules))
  end
  return out
end
--- rewrite.flatten(rules) -> one flat list of the rules in a rule, a list or a list of rule sets.
-- An entry that is neither a rule nor a list is an error naming its position.
rewrite.flatten = function(rules) return flatten(rules, nil, "rewrite.flatten") end

local shape_eq = Nodes.same_shape

-- Whether the replacement r (new nodes down to existing ones) may stand in for root: it must
-- not read the root itself, nor a value an in-place write clobbers (that write may come before
-- the root's users). Raises for a replacement that reads its own root.
local function admissible(r, root, existing, rule)
  local seen, ok = {}, true
  local function walk(n)
    if seen[n] then return end
    seen[n] = true
    if n == root then
      error(string.format("rewrite: rule '%s' returned a replacement that uses the node it replaces", rule.name), 0)
    end
    if existing[n] then
      if n.clobbered_by then ok = false end
      return
    end
    for _, u in ipairs(n.inputs) do walk(u) end
  end
  walk(r)
  return ok
end

local function describe(n) return n.op .. Nodes.shape_str(n._shape) end

--- dle.rewrite.apply(g, rules[, opts]) -> the rewritten graph (a copy; g is unchanged) and a
-- table of counts per rule name (every rule present, 0 when it never fired). rules: a rule, a
-- list of rules or of rule sets. opts.max_passes (100) bounds the passes.
function rewrite.apply(g, rules, opts)
  local Graph = require("dle.graph").Graph
  if getmetatable(g) ~= Graph then check.error("rewrite.apply: expected a graph, got " .. check.typename(g)) end
  local list = flatten(rules, nil, "rewrite.apply")
  opts = check.options(opts, "rewrite.apply", {"max_passes"})
  local max_passes = opts.max_passes or 100
  local counts, by_op, anywhere = {}, {}, {}
  for _, r in ipairs(list) do
    counts[r.name] = counts[r.name] or 0
    if r.root then
      by_op[r.root] = by_op[r.root] or {}
      table.insert(by_op[r.root], r)
    else
      anywhere[#anywhere + 1] = r
    end
  end
  g = g:copy()
  -- the subgraphs of control-flow nodes (cond, while_loop, scan) get the same rules, as copies
  for _, n in ipairs(g:nodes()) do
    if n.subgraphs then
      local subs = {}
      for k, sub in ipairs(n.subgraphs) do
        local c
        subs[k], c = rewrite.apply(sub, list, opts)
        for name, v in pairs(c) do counts[name] = counts[name] + v end
      end
      n.subgraphs = subs
    end
  end
  local effects = {}
  for _, n in ipairs(g.effects) do effects[n] = true end
  for pass = 1, max_passes + 1 do
    local nodes = g:nodes()
    local existing, users = {}, g:users()
    for _, n in ipairs(nodes) do existing[n] = true end
    local outputs = {}
    for k, n in ipairs(g.outputs) do
      outputs[n] = outputs[n] or {}
      table.insert(outputs[n], k)
    end
    local function users_of(n) return users[n] or {} end
    local fired, replaced = {}, {}
    for _, n in ipairs(nodes) do
      if not replaced[n] and not effects[n] then
        local second_in_use = false
        for _, u in ipairs(users[n]) do
          if u.op == "output" then second_in_use = true end
        end
        local candidates = by_op[n.op]
        local function try(r)
          local m = P.match(r.pattern, n)
          if not m then return false end
          m.graph, m.users, m.is_output = g, users_of, function(x) return outputs[x] ~= nil end
          local rep = r.replace(m)
          if rep == nil or rep == n then return false end
          if getmetatable(rep) ~= Node then
            error(string.format("rewrite: rule '%s' returned a %s, not a graph node", r.name, type(rep)), 0)
          end
          if not shape_eq(rep._shape, n._shape) or rep._dtype ~= n._dtype then
            error(string.format("rewrite: rule '%s' replaced a %s %s node by a %s %s one", r.name,
                                Nodes.shape_str(n._shape), n._dtype, Nodes.shape_str(rep._shape), rep._dtype), 0)
          end
          if not admissible(rep, n, existing, r) then return false end
          if debug_level >= 2 then
            io.stderr:write(string.format("[dle] rewrite %s: %s -> %s\n", r.name, describe(n), describe(rep)))
          end
          for _, u in ipairs(users[n]) do
            for k, x in ipairs(u.inputs) do
              if x == n then u.inputs[k] = rep end
            end
          end
          users[rep] = users[rep] or {}
          for _, u in ipairs(users[n]) do table.insert(users[rep], u) end
          for _, k in ipairs(outputs[n] or {}) do g.outputs[k] = rep end
          if outputs[n] then
            outputs[rep] = outputs[rep] or {}
            for _, k in ipairs(outputs[n]) do table.insert(outputs[rep], k) end
          end
          replaced[n] = true
          counts[r.name] = counts[r.name] + 1
          fired[r.name] = (fired[r.name] or 0) + 1
          return true
        end
        if not second_in_use then
          local done = false
          for _, r in ipairs(candidates or {}) do
            if try(r) then done = true; break end
          end
          if not done then
            for _, r in ipairs(anywhere) do
              if try(r) then break end
            end
          end
        end
      end
    end
    g:compact()
    if next(fired) == nil then return g, counts end
    if pass > max_passes then
      local names = {}
      for name, c in pairs(fired) do names[#names + 1] = string.format("'%s' (%d times)", name, c) end
      table.sort(names)
      check.error(string.format("rewrite.apply: the rules did not settle after %d passes; still firing: %s",
                          max_passes, table.concat(names, ", ")))
    end
  end
end

-- verify's float64 stand-ins: a random tensor per P.any leaf, shape `shape`.
local function instantiate(p, shape, leaves, rng_dtype)
  if p.kind == "any" then
    if p.name and leaves[p.name] then return leaves[p.name] end
    local n = B.const(core.randn(shape, {dtype = rng_dtype}))
    if p.name then leaves[p.name] = n end
    return n
  elseif p.kind == "const" then
    if p.value ~= nil then return B.const(core.full({}, p.value, {dtype = rng_dtype})) end
    return B.const(core.randn(shape, {dtype = rng_dtype}))
  end
  local ins = {}
  for i, a in ipairs(p.args) do ins[i] = instantiate(a, shape, leaves, rng_dtype) end
  local n = B.make(p.op, ins, p.attrs and (function()
    local a = {}
    for k, v in pairs(p.attrs) do a[k] = v end
    return a
  end)() or nil)
  if p.name then leaves[p.name] = leaves[p.name] or n end
  return n
end

local function max_error(a, b)
  local sa, sb = a:shape(), b:shape()
  if not shape_eq(sa, sb) then return math.huge, "shapes differ" end
  local d = (a:double() - b:double()):abs()
  local scale = 1 + b:double():abs():max():item()
  return d:max():item() / scale
end

--- dle.rewrite.verify(rule, {trials = 10, tol = 1e-6, shape = {3, 4}}) -> ok, max_error[, message]
-- Checks on random inputs that rule preserves results. Each trial builds the rule's pattern from
-- random float64 tensors (every P.any leaf a constant of opts.shape, P.const(v) the scalar v, ops
-- built with the pattern's attrs), or traces rule.example(trial) when the rule has one (for
-- patterns whose ops need particular shapes), applies the rule alone and compares the results
-- before and after; max_error is the largest difference relative to 1 + max |before|. Not ok when
-- some trial differs by more than tol, when the rule never fired, or when a trial raised an error.
function rewrite.verify(rule, opts)
  if getmetatable(rule) ~= Rule then check.error("rewrite.verify: expected a rule, got " .. check.typename(rule)) end
  opts = check.options(opts, "rewrite.verify", {"trials", "tol", "shape"})
  local trials = opts.trials or 10
  local tol = opts.tol or 1e-6
  local dle = require("dle")
  local graph = require("dle.graph")
  local worst, fired = 0, 0
  for trial = 1, trials do
    local ok, err = pcall(function()
      local before
      if rule.example then
        local fn, inputs = rule.example(trial)
        before = graph.trace(fn, table.unpack(inputs or {}))
      else
        local root = instantiate(rule.pattern, opts.shape or {3, 4}, {}, "float64")
        before = graph.new()
        before.outputs = {root}
        before.template = {n = 1, items = {{node = true}}}
      end
      local after, counts = rewrite.apply(before, {rule})
      if counts[rule.name] == 0 then return end
      fired = fired + 1
      local ins = {}
      for i, n in ipairs(before.inputs) do
        local x = before.example_inputs[i]
        ins[i] = n._dtype:match("^float") and dle.randn(n._shape, {dtype = n._dtype}) or x
      end
      local want = require("dle.graph.run").run_flat(before, table.unpack(ins))
      local got = require("dle.graph.run").run_flat(after, table.unpack(ins))
      for k = 1, #want do
        local e, why = max_error(got[k], want[k])
        if why then error("output " .. k .. ": " .. why, 0) end
        if e ~= e then e = math.huge end
        worst = math.max(worst, e)
      end
    end)
    if not ok then return false, worst, "rule '" .. rule.name .. "': trial " .. trial .. ": " .. tostring(err) end
  end
  if fired == 0 then return false, worst, "rule '" .. rule.name .. "' never fired on its own pattern" end
  if worst > tol then
    return false, worst, string.format("rule '%s' changes results: max error %.3g > %.3g", rule.name, worst, tol)
  end
  return true, worst
end

--- dle.rewrite.discover{ops, max_nodes, inputs, constants, path, trials, max_rules} -> rules,
-- report: rules found by enumerating and fingerprinting small expressions (dle.rewrite.discover).
function rewrite.discover(opts) return require("dle.rewrite.discover")(opts) end

-- The built-in rule sets load on first use: dle.rewrite.rules.algebra, .fusion, .inference.
rewrite.rules = setmetatable({}, {__index = function(t, name)
  local known = {algebra = true, fusion = true, inference = true}
  if not known[name] then return nil end
  local set = require("dle.rewrite.rules." .. name)
  rawset(t, name, set)
  return set
end})

return check.export(rewrite)
