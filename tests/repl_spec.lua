-- repl_spec.lua — the REPL (dle.repl): driven through a pipe into scripts/dle (values printed,
-- multi-line input, error recovery, os.exit), plus its completion and printing functions in-process.
local dle = require("dle")
local repl = require("dle.repl")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local launcher = root .. "/scripts/dle"

-- Feeds `lines` to scripts/dle (no arguments: the REPL) through a pipe; returns stdout, stderr
-- and the exit status.
local function run_repl(lines)
  local out, err = os.tmpname(), os.tmpname()
  local p = assert(io.popen(string.format("%q >%q 2>%q", launcher, out, err), "w"))
  p:write(table.concat(lines, "\n"), "\n")
  local _, _, status = p:close()
  local function slurp(path)
    local f = assert(io.open(path))
    local s = f:read("a")
    f:close()
    os.remove(path)
    return s
  end
  return slurp(out), slurp(err), status
end

describe("the REPL through a pipe", function()
  it("prints the value of an expression, without banner or prompt when stdin is not a terminal", function()
    local out, err, status = run_repl({"1 + 1"})
    assert.are.equal("2\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
  end)

  it("has dle preloaded as a global and prints tensors in full with tostring", function()
    local out = run_repl({"dle.version", "dle.arange(0, 6):view(2, 3)"})
    local expected = dle.version .. "\n" .. tostring(dle.arange(0, 6):view(2, 3)) .. "\n"
    assert.are.equal(expected, out)
    assert.truthy(out:find("[dle.Tensor float32 of size 2x3]", 1, true))
  end)

  it("runs statements silently and keeps globals between lines", function()
    local out = run_repl({"x = 41", "local unused = 1", "x + 1"})
    assert.are.equal("42\n", out)
  end)

  it("prints several results separated by tabs, and nil", function()
    local out = run_repl({"1, 'a', true, nil"})
    assert.are.equal("1\ta\ttrue\tnil\n", out)
  end)

  it("prints tables one level deep, tensors inside them as a summary", function()
    local out = run_repl({"{1, 2, k = 'v', t = dle.zeros(2, 2, {dtype = 'int64'}), sub = {3}}"})
    assert.truthy(out:match('^{1, 2, k = "v", sub = table: 0x%x+, t = %[dle.Tensor int64 of size 2x2%]}\n$'), out)
  end)

  it("continues a chunk over several lines while it is incomplete", function()
    local out = run_repl({
      "for i = 1, 3 do",
      "  io.write(i * 10, ' ')",
      "end",
      "function add(a,",
      "             b)",
      "  return a + b",
      "end",
      "add(2,",
      "3)",
    })
    assert.are.equal("10 20 30 5\n", out)
  end)

  it("prints an error with a traceback on stderr and keeps going", function()
    local out, err, status = run_repl({
      "local function inner() error('boom') end",
      "function outer() local function inner() error('boom') end inner() end",
      "outer()",
      "1 + 2",
    })
    assert.are.equal("3\n", out)
    assert.truthy(err:find("stdin:1: boom", 1, true), err)
    assert.truthy(err:find("stack traceback:", 1, true), err)
    assert.truthy(err:find("in function 'outer'", 1, true) or err:find("in global 'outer'", 1, true), err)
    assert.falsy(err:find("repl.lua", 1, true), "the REPL's own frames are left out:\n" .. err)
    assert.are.equal(0, status)
  end)

  it("reports dle's errors naming the function and shapes, then keeps going", function()
    local out, err = run_repl({"dle.ones(2, 3) + dle.ones(4)", "'still here'"})
    assert.are.equal("still here\n", out)
    assert.truthy(err:find("add", 1, true), err)
    assert.truthy(err:find("{2,3}", 1, true) and err:find("{4}", 1, true), err)
  end)

  it("reports a syntax error and keeps going", function()
    local out, err = run_repl({"1 +* 2", "x = = 1", "'ok'"})
    assert.are.equal("ok\n", out)
    assert.truthy(err:find("stdin:1:", 1, true), err)
    local _, count = err:gsub("stdin:1:", "")
    assert.are.equal(2, count)
  end)

  it("prints errors raised with non-string values", function()
    local out, err = run_repl({"error({})", "error(setmetatable({}, {__tostring = function() return 'custom' end}))",
                               "1"})
    assert.are.equal("1\n", out)
    assert.truthy(err:find("error object is a table value", 1, true), err)
    assert.truthy(err:find("custom", 1, true), err)
  end)

  it("prints help() of a class, of an instance's method and, without an argument, how to use it", function()
    local help = require("dle.help")
    local out, err = run_repl({"help(dle.nn.Linear)", "m = dle.nn.Linear(2, 2)", "help(m.parameters)", "help()"})
    assert.are.equal("", err)
    local expected = help.doc(dle.nn.Linear) .. "\n" .. help.doc(dle.nn.Module.parameters) .. "\n"
    assert.are.equal(expected, out:sub(1, #expected))
    assert.truthy(out:sub(#expected + 1):find("^help%(f%) prints the doc of a function, class, method or module"), out)
  end)

  it("stops at os.exit() with its status", function()
    local out, _, status = run_repl({"print('before')", "os.exit(3)", "print('after')"})
    assert.are.equal("before\n", out)
    assert.are.equal(3, status)
  end)

  it("says so when the input ends inside an incomplete chunk", function()
    local out, err, status = run_repl({"1", "for i = 1, 2 do"})
    assert.are.equal("1\n", out)
    assert.truthy(err:find("incomplete", 1, true), err)
    assert.are.equal(0, status)
  end)
end)

describe("repl.compile", function()
  it("compiles expressions as return statements and statements as they are", function()
    assert.are.equal(7, repl.compile("3 + 4")())
    local env = {}
    repl.compile("y = 5", env)()
    assert.are.equal(5, env.y)
  end)

  it("tells incomplete input from a syntax error", function()
    local fn, err = repl.compile("if true then")
    assert.is_nil(fn)
    assert.are.equal("incomplete", err)
    fn, err = repl.compile("x = = 1")
    assert.is_nil(fn)
    assert.truthy(err:find("stdin:1:", 1, true), err)
  end)
end)

-- Runs a Lua chunk in a child lua5.4 with this process's module paths; returns its stdout.
local function run_lua(code)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(code)
  f:close()
  local p = assert(io.popen(string.format("LUA_PATH=%q LUA_CPATH=%q lua5.4 %q", package.path, package.cpath, file)))
  local out = p:read("a")
  p:close()
  os.remove(file)
  return out
end

describe("repl.complete", function()
  local t = dle.ones(2, 3)
  local env = setmetatable({
    dle = dle,
    t = t,
    s = "text",
    cfg = {alpha = 1, beta = 2, sub = {gamma = 3}, run = function() end},
  }, {__index = _G})

  it("completes globals and keywords", function()
    assert.are.same({"print"}, repl.complete("prin", env))
    local words = repl.complete("wh", env)
    assert.truthy(#words >= 1)
    for _, w in ipairs(words) do assert.are.equal("wh", w:sub(1, 2)) end
    assert.truthy(table.concat(words, " "):find("while", 1, true))
  end)

  it("completes fields of tables after a dot, nested paths included", function()
    assert.are.same({"cfg.alpha"}, repl.complete("cfg.al", env))
    assert.are.same({"cfg.sub.gamma"}, repl.complete("cfg.sub.", env))
    assert.are.same({"cfg.alpha", "cfg.beta", "cfg.run", "cfg.sub"}, repl.complete("cfg.", env))
  end)

  it("completes only functions after a colon", function()
    assert.are.same({"cfg:run"}, repl.complete("cfg:", env))
  end)

  it("completes dle functions and tensor methods from dle.Tensor", function()
    local ones = repl.complete("dle.ones", env)
    assert.are.same({"dle.ones", "dle.ones_like"}, ones)
    local methods = repl.complete("t:nar", env)
    assert.are.same({"t:narrow"}, methods)
    local all = repl.complete("t:", env)
    local n_methods = 0
    for k, v in pairs(dle.Tensor) do
      if type(k) == "string" and type(v) == "function" and k:match("^[%a][%w_]*$") then n_methods = n_methods + 1 end
    end
    assert.are.equal(n_methods, #all)
    assert.truthy(table.concat(repl.complete("t.", env), " "):find("t.requires_grad", 1, true))
  end)

  it("completes dle's lazily loaded modules and functions without loading them", function()
    -- a fresh dle in a child process, so this process's loaded modules do not count
    local out = run_lua([[
      local dle = require("dle")
      local repl = require("dle.repl")
      local env = {dle = dle}
      local words = {}
      for _, p in ipairs({"dle.am", "dle.compi", "dle.grap", "dle.dis", "dle.profi", "dle.onn", "dle.mode", "dle.n"}) do
        for _, w in ipairs(repl.complete(p, env)) do words[#words + 1] = w end
      end
      local loaded = {}
      for _, m in ipairs({"dle.amp", "dle.compile", "dle.graph", "dle.dist", "dle.profile", "dle.onnx", "dle.models",
                          "dle.nn"}) do
        if package.loaded[m] then loaded[#loaded + 1] = m end
      end
      print(table.concat(words, " ") .. "|" .. table.concat(loaded, " "))
      print(table.concat(repl.complete("dle.amp.Grad", env), " "))
    ]])
    local words, loaded, after = out:match("^(.-)|(.-)\n(.-)\n$")
    for _, w in ipairs({"dle.amp", "dle.compile", "dle.compile_info", "dle.graph", "dle.dist", "dle.profile",
                        "dle.onnx", "dle.models", "dle.nn"}) do
      assert.truthy((" " .. words .. " "):find(" " .. w .. " ", 1, true), w .. " missing from: " .. words)
    end
    assert.are.equal("", loaded, "completion loaded modules")
    -- after the dot the module is loaded, and its names complete
    assert.are.equal("dle.amp.GradScaler", after)
  end)

  it("completes methods of module instances from their class and base classes, not internal names", function()
    env.m = dle.nn.Linear(2, 2)
    local methods = repl.complete("m:", env)
    local set = {}
    for _, w in ipairs(methods) do set[w] = true end
    for _, w in ipairs({"m:forward", "m:parameters", "m:named_parameters", "m:state_dict", "m:zero_grad", "m:train",
                        "m:eval", "m:to"}) do
      assert.truthy(set[w], w .. " missing from: " .. table.concat(methods, " "))
    end
    assert.are.same({"m:parameters"}, repl.complete("m:par", env))
    assert.is_nil(set["m:__repr"], "internal names are hidden")
    local fields = table.concat(repl.complete("m.", env), " ")
    assert.truthy(fields:find("m.weight", 1, true) and fields:find("m.forward", 1, true), fields)
    assert.falsy(fields:find("m._params", 1, true), fields)
    assert.truthy(table.concat(repl.complete("m._p", env), " "):find("m._params", 1, true))
    -- a class whose __index is a function (an optimizer's lr property) still lists its methods
    env.opt = dle.optim.SGD(env.m:parameters(), {lr = 0.1})
    assert.are.same({"opt:step"}, repl.complete("opt:ste", env))
    assert.are.same({"opt:zero_grad"}, repl.complete("opt:zero_g", env))
  end)

  it("completes the name after an operator in the same word, keeping the operator", function()
    assert.are.same({"#cfg.alpha"}, repl.complete("#cfg.al", env))
    assert.are.same({"-t:narrow"}, repl.complete("-t:nar", env))
    assert.are.same({}, repl.complete("#cfg.alpha.x", env))
  end)

  it("completes string methods", function()
    assert.are.same({"s:upper"}, repl.complete("s:upp", env))
  end)

  it("gives nothing for unknown names and expressions it cannot follow", function()
    assert.are.same({}, repl.complete("nosuch.x", env))
    assert.are.same({}, repl.complete("cfg.alpha.x", env))
    assert.are.same({}, repl.complete("t[1]:", env))
    assert.are.same({}, repl.complete("f():", env))
  end)
end)

describe("repl.value_text", function()
  it("prints tensors with tostring and other values with tostring", function()
    local t = dle.arange(0, 4)
    assert.are.equal(tostring(t), repl.value_text(t))
    assert.are.equal("3.5", repl.value_text(3.5))
    assert.are.equal("x", repl.value_text("x"))
  end)

  it("prints tables shallowly: arrays, sorted keys, quoted strings, cycles as addresses", function()
    local cyc = {n = 1}
    cyc.self = cyc
    assert.truthy(repl.value_text(cyc):match("^{n = 1, self = table: 0x%x+}$"), repl.value_text(cyc))
    assert.are.equal('{"a", 2, [10] = true, b = "c\\nd"}', repl.value_text({"a", 2, b = "c\nd", [10] = true}))
    assert.are.equal("{}", repl.value_text({}))
  end)

  it("cuts long tables short", function()
    local big = {}
    for i = 1, 100 do big[i] = i end
    local text = repl.value_text(big)
    assert.truthy(text:find(", ...}$"), text)
    assert.falsy(text:find("100", 1, true))
  end)

  it("uses a table's __tostring when it has one", function()
    local obj = setmetatable({}, {__tostring = function() return "<obj>" end})
    assert.are.equal("<obj>", repl.value_text(obj))
  end)
end)
