-- docs_spec.lua — the documentation stays true: every public function has a doc comment (the text
-- of the API reference and of the REPL's help), doc entries name functions that exist, LDoc builds
-- the reference, the README's links resolve and its tour runs.
local help = require("dle.help")
local H = require("helpers")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

local function slurp(path) return (assert(H.read_file(path), path)) end

describe("doc comments", function()
  it("document every public function (dle.*, its subpackages, tensor, Module and Optimizer methods)", function()
    local missing = {}
    for _, e in ipairs(help.public_functions()) do
      if not help.doc(e.fn) then missing[#missing + 1] = e.name end
    end
    -- a Lua function: a `---` comment block right above its definition; a C one: an @function entry
    -- in lua/dle/doc/*.lua (see lua/dle/help.lua)
    assert.are.same({}, missing)
  end)

  it("name only functions that exist: every @function entry of lua/dle/doc is a public name", function()
    local public = {}
    for _, e in ipairs(help.public_functions()) do public[e.name] = true end
    local stale = {}
    for name in pairs(help.entry_names()) do
      if not public[name] then stale[#stale + 1] = name end
    end
    table.sort(stale)
    assert.are.same({}, stale)
  end)

  it("are found for a Lua function, a C function and a method, by value and by name", function()
    local dle = require("dle")
    assert.truthy((help.doc(dle.nn.functional.cross_entropy) or ""):find("cross", 1, true))
    assert.is_string(help.doc(dle.zeros))
    assert.are.equal(help.doc(dle.exp), help.doc(dle.Tensor.exp))
    assert.are.equal(help.doc(dle.zeros), help.doc("dle.zeros"))
    assert.is_nil(help.doc(function() end))
    assert.is_nil(help.doc("dle.no_such_function"))
  end)

  it("are found for a class (its file's or line's text, then its constructor's), a module, a method", function()
    local dle = require("dle")
    local linear = help.doc(dle.nn.Linear)
    assert.truthy(linear:find("^dle.nn.Linear%(in, out"), linear)          -- lua/dle/nn/linear.lua's header
    assert.truthy(linear:find("@param in_features", 1, true), linear)     -- Linear:init's comment
    assert.are.equal(linear, help.doc("dle.nn.Linear"))
    local adam = help.doc(dle.optim.Adam)                                 -- a class made by Optimizer.extend
    assert.truthy(adam:find("^dle.optim.Adam: adaptive moment"), adam)
    assert.truthy(adam:find("Makes an optimizer over params", 1, true), adam)
    local prelu = help.doc(dle.nn.PReLU)                                  -- one of several classes in a file
    assert.truthy(prelu:find("learnable slopes", 1, true), prelu)
    assert.truthy((help.doc(dle.nn.ReLU) or ""):find("Activation layers", 1, true))
    assert.truthy((help.doc(dle.nn) or ""):find("^dle.nn: modules"))
    local m = dle.nn.Linear(2, 2)
    assert.are.equal(help.doc(dle.nn.Module.parameters), help.doc(m.parameters))
    assert.truthy(help.doc(m.parameters):find("registration order", 1, true))
    assert.truthy(help.doc(m.forward):find("@param x", 1, true))
    assert.are.equal(help.doc(dle.Tensor.view), help.doc("Tensor:view"))
    assert.is_nil(help.doc({}))
    assert.is_nil(help.doc(dle.nn.Module:extend("Undocumented")))
  end)

  it("comment_above takes the block right above a line only when it starts with ---", function()
    local path = os.tmpname()
    H.write_file(path, "--- Adds.\n-- More.\nlocal function a() end\n-- plain\nlocal function b() end\n\n"
                       .. "local function c() end\n")
    assert.are.equal("Adds.\nMore.", help.comment_above(path, 3))
    assert.is_nil(help.comment_above(path, 5))
    assert.is_nil(help.comment_above(path, 7))
    os.remove(path)
  end)
end)

describe("the API reference", function()
  it("builds with LDoc (scripts/docs) into an index that links every module", function()
    if not H.have_command("ldoc") then return pending("ldoc is not installed (apt-get install lua-ldoc)") end
    local dir = os.tmpname()
    os.remove(dir)
    local ok = os.execute(string.format("cd %q && env -u LD_PRELOAD ldoc -q -c docs/config.ld -d %q . >/dev/null 2>&1",
                                        root, dir))
    assert.truthy(ok)
    local index = slurp(dir .. "/index.html")
    for _, m in ipairs({"nn.functional", "optim.adam", "io", "autograd"}) do
      assert.truthy(index:find('href="modules/' .. m .. '.html"', 1, true), m)
    end
    os.execute(string.format("rm -rf %q", dir))
  end)
end)

describe("README.md", function()
  local readme = slurp(root .. "/README.md")

  it("is a front page: at most about 200 lines", function()
    local _, n = readme:gsub("\n", "")
    assert.truthy(n <= 210, n .. " lines")
  end)

  it("links only to files that exist (README and docs/*.md)", function()
    local broken = {}
    local function check(text, base)
      for target in text:gmatch("%]%(([^)#]+)[^)]*%)") do
        if not target:match("^%a+://") and not target:match("^docs/api/") then
          local f = io.open(base .. "/" .. target)
          if f then f:close() else broken[#broken + 1] = base .. ": " .. target end
        end
      end
    end
    check(readme, root)
    local p = io.popen("ls " .. root .. "/docs/*.md")
    for path in p:read("a"):gmatch("[^\n]+") do check(slurp(path), root .. "/docs") end
    p:close()
    assert.are.same({}, broken)
  end)

  it("has a tour that runs as written", function()
    local code = readme:match("## A short tour\n\n```lua\n(.-)```")
    assert.is_string(code)
    local path = os.tmpname() .. ".lua"
    H.write_file(path, code)
    local p = io.popen(string.format("%q %q 2>&1; echo \"exit=$?\"", root .. "/scripts/dle", path))
    local out = p:read("a")
    p:close()
    os.remove(path)
    assert.truthy(out:find("exit=0", 1, true), out)
    assert.truthy(out:find("add: shapes {2,3} and {4} cannot be broadcast", 1, true), out)
    assert.truthy(out:find("bfloat16", 1, true), out)
  end)
end)
