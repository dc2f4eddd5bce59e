-- rockspec_spec.lua — the LuaRocks package: the rockspec lists every C source and Lua module of
-- the tree, and (tag #rock; DLE_SKIP_ROCK=1 skips it) `luarocks make` of a copy of the tree installs
-- a dle that plain lua5.4 and the installed `dle` launcher can load.
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local ROCKSPEC = "rockspec/dle-scm-1.rockspec"

-- Runs a shell command; returns its output (stdout and stderr) and exit status.
-- LD_PRELOAD is dropped: under `scripts/test --asan` it holds libasan, which gcc and luarocks
-- must not run with (LeakSanitizer would fail them).
-- Quotes a string for the shell.
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local p = assert(io.popen("env -u LD_PRELOAD sh -c " .. q(cmd) .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
end

local function sorted(list)
  table.sort(list)
  return list
end

-- Files matching a find expression under the repo root, relative to it, sorted.
local function files(find_args)
  local out = sh("cd " .. q(root) .. " && find " .. find_args)
  local list = {}
  for line in out:gmatch("[^\n]+") do list[#list + 1] = (line:gsub("^%./", "")) end
  return sorted(list)
end

-- Evaluates the rockspec the way LuaRocks does: in an empty environment.
local function load_rockspec()
  local env = {}
  local chunk = assert(loadfile(root .. "/" .. ROCKSPEC, "t", env))
  chunk()
  return env
end

describe("the rockspec", function()
  local spec = load_rockspec()

  it("is a builtin build of dle.native with OpenBLAS declared as an external dependency", function()
    assert.are.equal("dle", spec.package)
    assert.are.equal("builtin", spec.build.type)
    assert.are.same({library = "openblas"}, spec.external_dependencies.OPENBLAS)
    -- dle.core is only the loader that sets up OpenMP before loading dle.native
    assert.are.same({"bindings/loader/core_loader.c"}, spec.build.modules["dle.core"].sources)
    local core = spec.build.modules["dle.native"]
    assert.are.equal("table", type(core))
    for _, lib in ipairs({"openblas", "gomp", "m", "dl"}) do
      assert.truthy(table.concat(core.libraries, " "):find(lib, 1, true), lib)
    end
  end)

  it("lists every C source of engine/, engine/ops/, kernels/cpu/ and bindings/, and nothing else", function()
    local on_disk = files("engine kernels/cpu bindings -maxdepth 2 -name '*.c' " ..
                         "-not -path 'kernels/cpu/*/*' -not -path 'bindings/*/*'")
    local listed = sorted({table.unpack(spec.build.modules["dle.native"].sources)})
    assert.are.same(on_disk, listed)
  end)

  it("lists every Lua module under lua/dle with its module name", function()
    local on_disk = files("lua/dle -name '*.lua'")
    local listed, names = {}, {}
    for name, path in pairs(spec.build.modules) do
      if type(path) == "string" then
        listed[#listed + 1] = path
        names[path] = name
      end
    end
    assert.are.same(on_disk, sorted(listed))
    assert.are.equal("dle", names["lua/dle/init.lua"])
    for path, name in pairs(names) do
      local expected = "dle." .. path:match("^lua/dle/(.*)%.lua$"):gsub("/init$", ""):gsub("/", ".")
      if path == "lua/dle/init.lua" then expected = "dle" end
      assert.are.equal(expected, name)
    end
  end)

  it("installs a dle launcher that exists and is a Lua 5.4 script", function()
    local bin = spec.build.install.bin.dle
    local f = assert(io.open(root .. "/" .. bin))
    local first = f:read("l")
    f:close()
    assert.are.equal("#!/usr/bin/env lua5.4", first)
  end)
end)

describe("luarocks make #rock", function()
  if os.getenv("DLE_SKIP_ROCK") == "1" then
    pending("skipped: DLE_SKIP_ROCK=1")
    return
  end

  local tmp, tree, build_out, build_status, path_env

  lazy_setup(function()
    tmp = os.tmpname()
    os.remove(tmp)
    tree = tmp .. "/tree"
    -- a copy of the sources, so the objects builtin leaves in place stay out of the checkout; the
    -- ONNX protobuf code generated as premake5.lua does it (bindings/lua_onnx.c includes it)
    build_out, build_status = sh(string.format(
      "mkdir -p %s/src && cd %s && cp -r engine kernels bindings lua rockspec %s/src && cd %s/src && " ..
      "mkdir -p build/gen/onnx && protoc-c --proto_path=/usr/include/onnx --c_out=build/gen/onnx " ..
      "/usr/include/onnx/onnx.proto && " ..
      "luarocks --lua-version 5.4 make %s --tree %s " ..
      "CFLAGS='-O2 -fPIC -std=gnu11 -fopenmp' LIBFLAG='-shared -fopenmp -Wl,-z,nodelete'",
      q(tmp), q(root), q(tmp), q(tmp), ROCKSPEC, q(tree)))
    path_env = sh("luarocks --lua-version 5.4 --tree " .. q(tree) .. " path")
  end)

  lazy_teardown(function()
    if tmp and tmp:match("^/tmp/") then sh("rm -rf " .. q(tmp)) end
  end)

  it("builds and installs into a fresh tree", function()
    assert.are.equal(0, build_status, build_out)
    assert.truthy(build_out:find("dle scm-1 is now installed", 1, true), build_out)
  end)

  it("lets plain lua5.4 require dle after `luarocks path`", function()
    local out, status = sh(path_env .. "\ncd / && lua5.4 -e " ..
      q('local dle = require "dle"; print((dle.ones(2, 2) + 1):totable()[2][2], ' ..
        'package.searchpath("dle.core", package.cpath))'))
    assert.are.equal(0, status, out)
    assert.are.equal("2.0\t" .. tree .. "/lib/lua/5.4/dle/core.so\n", out)
  end)

  it("installs a bin/dle that runs -e chunks, scripts with arguments and the REPL", function()
    local dle_bin = q(tree .. "/bin/dle")
    local out,
        status = sh("cd / && " .. dle_bin .. " -e "
                    .. q('print(require("dle").arange(0, 3, {dtype = "int64"}):totable()[3], ...)') .. " a b")
    assert.are.equal(0, status, out)
    assert.are.equal("2\ta\tb\n", out)

    local script = tmp .. "/script.lua"
    local f = assert(io.open(script, "w"))
    f:write('local dle = require "dle"\nprint(arg[0] ~= nil, arg[1], select("#", ...), dle.zeros(3):numel())\n')
    f:close()
    out, status = sh("cd / && " .. dle_bin .. " " .. q(script) .. " x y")
    assert.are.equal(0, status, out)
    assert.are.equal("true\tx\t2\t3\n", out)

    out, status = sh("cd / && printf '6 * 7\\n' | " .. dle_bin)
    assert.are.equal(0, status, out)
    assert.are.equal("42\n", out)

    out, status = sh("cd / && " .. dle_bin .. " -e " .. q('error("bad input")'))
    assert.are_not.equal(0, status)
    assert.truthy(out:find("bad input", 1, true), out)
  end)
end)
