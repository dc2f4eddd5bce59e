-- grad_coverage_spec.lua — every differentiable op (DLE_DIFF in engine/ops.def, as listed by
-- dle.core.op_table()) has a reverse rule (vjp) and a forward rule (jvp), and is gradient-checked
-- by some tests/grad_*_spec.lua. A spec declares the ops it checks on a line starting with
--   -- covers: add sub mul ...
-- (op names separated by spaces; several such lines may appear, conventionally at the top).
-- Each test fails listing every op that is missing, not only the first.
local dle = require("dle")

-- the directory holding this spec (busted may run from anywhere)
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests"

local function spec_files()
  local files = {}
  local p = io.popen('ls "' .. here .. '"')
  for name in p:lines() do
    if name:match("^grad_.*_spec%.lua$") and name ~= "grad_coverage_spec.lua" then
      files[#files + 1] = name
    end
  end
  p:close()
  table.sort(files)
  return files
end

-- op name -> list of spec files whose covers lines name it
local function covered()
  local by_op, files = {}, spec_files()
  for _, name in ipairs(files) do
    local f = assert(io.open(here .. "/" .. name))
    for line in f:lines() do
      local list = line:match("^%-%-%s*covers:(.*)$")
      if list then
        for op in list:gmatch("[%w_]+") do
          by_op[op] = by_op[op] or {}
          table.insert(by_op[op], name)
        end
      end
    end
    f:close()
  end
  return by_op, files
end

local function differentiable_ops()
  local ops = {}
  for _, o in ipairs(dle.core.op_table()) do
    if o.differentiable then ops[#ops + 1] = o end
  end
  return ops
end

local function fail_listing(what, missing, total)
  if #missing > 0 then
    error(string.format("%d of %d differentiable ops %s: %s", #missing, total, what,
                        table.concat(missing, " ")), 2)
  end
end

describe("gradient coverage", function()
  it("the op table lists differentiable ops with has_vjp / has_jvp fields", function()
    local ops = differentiable_ops()
    assert.is_true(#ops > 0)
    for _, o in ipairs(ops) do
      assert.are.equal("boolean", type(o.has_vjp), o.name)
      assert.are.equal("boolean", type(o.has_jvp), o.name)
    end
  end)

  for _, rule in ipairs({{"reverse", "vjp"}, {"forward", "jvp"}}) do
    local what = rule[1] .. " rule (" .. rule[2] .. ")"
    it("every differentiable op has a " .. what, function()
      local ops, missing = differentiable_ops(), {}
      for _, o in ipairs(ops) do
        if not o["has_" .. rule[2]] then missing[#missing + 1] = o.name end
      end
      fail_listing("have no " .. what, missing, #ops)
    end)
  end

  it("every differentiable op is named on a '-- covers:' line of a tests/grad_*_spec.lua", function()
    local ops, missing = differentiable_ops(), {}
    local by_op, files = covered()
    for _, o in ipairs(ops) do
      if not by_op[o.name] then missing[#missing + 1] = o.name end
    end
    fail_listing("are not covered by any gradient spec (read: "
                 .. (#files > 0 and table.concat(files, " ") or "no tests/grad_*_spec.lua found")
                 .. ")", missing, #ops)
  end)

  it("'-- covers:' lines name only differentiable ops (no typos)", function()
    local known = {}
    for _, o in ipairs(dle.core.op_table()) do known[o.name] = o.differentiable end
    local by_op = covered()
    local bad = {}
    for op, where in pairs(by_op) do
      if known[op] == nil then
        bad[#bad + 1] = op .. " (unknown op, in " .. table.concat(where, ", ") .. ")"
      elseif not known[op] then
        bad[#bad + 1] = op .. " (not differentiable, in " .. table.concat(where, ", ") .. ")"
      end
    end
    table.sort(bad)
    if #bad > 0 then error("covers lines name: " .. table.concat(bad, "; ")) end
  end)
end)
