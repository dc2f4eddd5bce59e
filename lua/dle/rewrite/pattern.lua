--- dle.rewrite.pattern: patterns over graph nodes, held as data (tinygrad's UPat).
--
--   local P = dle.rewrite.pattern
--   P.any "x"                       any node, bound as match.x (a name used twice must bind one node)
--   P.const(2)                      a scalar constant equal to 2; P.const() any constant
--   P.mul(P.any "x", P.const(1))    a mul node whose inputs match, in order
--   P.op("mul", a, b)               the same, the op given as a string
--   P.permute(P.any "x", {name = "p", where = function(node, match) ... end})
--
-- A pattern is a table {kind = "any" | "const" | "op", ...}. An op pattern with no argument
-- patterns matches the op whatever its inputs; with some, the node must have exactly that many
-- inputs. A trailing plain table gives options: name (binds the matched node too), where (a
-- predicate on the node and the match so far), attrs (fields the node's attrs must equal; verify
-- also builds its instances with them). In-place nodes never match an op pattern.
local Node = require("dle.graph.node").Node
local check = require("dle.check")

local P = {}

local function is_pattern(v)
  return type(v) == "table" and (v.kind == "any" or v.kind == "const" or v.kind == "op")
end
P.is_pattern = is_pattern

--- P.any(name) -> a pattern matching any node, bound as match[name] (name optional).
function P.any(name)
  if name ~= nil and type(name) ~= "string" then
    check.error("pattern.any: name must be a string, got " .. type(name))
  end
  return {kind = "any", name = name}
end

--- P.const(v) -> a pattern matching a scalar constant equal to v; P.const() any constant node.
function P.const(v, opts)
  if v ~= nil and type(v) ~= "number" and type(v) ~= "boolean" then
    check.error("pattern.const: value must be a number, got " .. type(v))
  end
  opts = check.options(opts, "pattern.const", {"name", "where"})
  return {kind = "const", value = v, name = opts.name, where = opts.where}
end

--- P.op(name, args...) -> a pattern matching a node of op `name` whose inputs match args.
function P.op(name, ...)
  if type(name) ~= "string" then check.error("pattern.op: op name must be a string, got " .. type(name)) end
  local args, opts = {...}, nil
  local last = args[#args]
  if #args > 0 and type(last) == "table" and not is_pattern(last) then
    opts = table.remove(args)
  end
  for i, a in ipairs(args) do
    if not is_pattern(a) then
      check.error(string.format("pattern.%s: argument %d must be a pattern (P.any, P.const, P.<op>), got %s",
                          name, i, type(a)))
    end
  end
  opts = check.options(opts, "pattern." .. name, {"name", "where", "attrs"})
  return {kind = "op", op = name, args = args, name = opts.name, where = opts.where, attrs = opts.attrs}
end

--- Whether every attr in want (a pattern's attrs) has its value in have (a node's attrs); list
-- values compare element by element.
function P.attrs_match(want, have)
  for k, v in pairs(want) do
    local h = have[k]
    if type(v) == "table" then
      if type(h) ~= "table" or #h ~= #v then return false end
      for i = 1, #v do
        if h[i] ~= v[i] then return false end
      end
    elseif h ~= v then
      return false
    end
  end
  return true
end

local function bind(m, name, node)
  if not name then return true end
  local had = m[name]
  if had ~= nil then return had == node end
  m[name] = node
  return true
end

-- Matches pattern p at node n, adding bindings to m; returns true on a match.
local function match(p, n, m)
  if getmetatable(n) ~= Node then return false end
  local kind = p.kind
  if kind == "any" then
    return bind(m, p.name, n)
  elseif kind == "const" then
    if n.op ~= "const" then return false end
    if p.value ~= nil and n.attrs.value ~= p.value then return false end
  else
    if n.op ~= p.op or n.inplace then return false end
    local args = p.args
    if #args > 0 then
      if #n.inputs ~= #args then return false end
      for i = 1, #args do
        if not match(args[i], n.inputs[i], m) then return false end
      end
    end
    if p.attrs and not P.attrs_match(p.attrs, n.attrs) then return false end
  end
  if not bind(m, p.name, n) then return false end
  if p.where and not p.where(n, m) then return false end
  return true
end

--- P.match(pattern, node) -> the match table (bindings, plus match.root = node), or nil.
function P.match(p, node)
  local m = {}
  if match(p, node, m) then
    m.root = node
    return m
  end
  return nil
end

--- P.root_op(pattern) -> the op name rules with this pattern are indexed under ("const" for
-- constants), or nil for P.any (such rules are tried at every node).
function P.root_op(p)
  if p.kind == "op" then return p.op end
  if p.kind == "const" then return "const" end
  return nil
end

-- P.<op>(args...) for every op name: P.mul, P.conv2d, P.batch_norm, ...
setmetatable(P, {__index = function(_, name)
  if type(name) ~= "string" then return nil end
  return function(...) return P.op(name, ...) end
end})

return check.export(P)
