-- rockspec_spec.lua — the LuaRocks package: the rockspec runs the project's own build and installs
-- what it makes (no file lists), and (tag #rock; DLE_SKIP_ROCK=1 skips it) `luarocks make` of a
-- copy of the tree installs a dle that plain lua5.4 and the installed `dle` launcher can load,
-- with the same build as scripts/build (OpenMP, dle.dist), and docs/building.md's commands work.
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local H = require("helpers")
local ROCKSPEC = "rockspec/dle-scm-1.rockspec"

-- Runs a shell command; returns its output (stdout and stderr) and exit status.
-- Under `scripts/test --asan`, LD_PRELOAD holds libasan, which gcc and luarocks must not run with
-- (LeakSanitizer would fail them), and CFLAGS/LDFLAGS the sanitizer flags, which the package's
-- build would take: all three are dropped.
-- Quotes a string for the shell.
local q = H.shell_quote

local function sh(cmd)
  local p = assert(io.popen("env -u LD_PRELOAD -u CFLAGS -u LDFLAGS sh -c " .. q(cmd) .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
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

  it("is a command build running the project's own build, with OpenBLAS an external dependency", function()
    assert.are.equal("dle", spec.package)
    assert.are.equal("command", spec.build.type)
    assert.are.same({library = "openblas"}, spec.external_dependencies.OPENBLAS)
    assert.truthy(spec.build.build_command:find("scripts/build release modules", 1, true),
                  spec.build.build_command)
    assert.is_nil(spec.build.modules, "a command build lists no modules")
  end)

  it("installs lua/dle, the built libraries and the launcher into LuaRocks' directories", function()
    local install = spec.build.install_command
    assert.truthy(install:find("cp -R lua/dle $(LUADIR)/", 1, true), install)
    assert.truthy(install:find("lib/dle/*.so $(LIBDIR)/dle/", 1, true), install)
    assert.truthy(install:find("cp rockspec/dle $(BINDIR)/dle", 1, true), install)
  end)

  it("names no source file (a new file or op family needs no edit here)", function()
    local text = assert(H.read_file(root .. "/" .. ROCKSPEC))
    assert.is_nil(text:match("[%w_/]+%.c[\"']"), "a C file is named")
    assert.is_nil(text:match("\"[%w_/]+%.lua\""), "a Lua file is named")
  end)

  it("installs a dle launcher that exists and is a Lua 5.4 script", function()
    local first = assert(H.read_file(root .. "/rockspec/dle")):match("^[^\n]*")
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
    -- a copy of the sources (what the build reads), so its build-rock/ stays out of the checkout;
    -- NVCC=/nonexistent: without the CUDA backend (cuda_spec covers it), a shorter build
    build_out, build_status = sh(string.format(
      "mkdir -p %s/src && cd %s && cp -r engine kernels bindings lua rockspec scripts premake5.lua %s/src && " ..
      "cd %s/src && NVCC=/nonexistent luarocks --lua-version 5.4 make %s --tree %s",
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

  it("installs dle.native built with OpenMP by the project's flags", function()
    local out = sh("ldd " .. q(tree .. "/lib/lua/5.4/dle/native.so"))
    assert.truthy(out:find("libgomp", 1, true), out)
  end)

  it("lets plain lua5.4 require dle after `luarocks path`", function()
    local out, status = sh(path_env .. "\ncd / && lua5.4 -e " ..
      q('local dle = require("dle"); print((dle.ones(2, 2) + 1):totable()[2][2], ' ..
        'package.searchpath("dle.core", package.cpath))'))
    assert.are.equal(0, status, out)
    assert.are.equal("2.0\t" .. tree .. "/lib/lua/5.4/dle/core.so\n", out)
  end)

  it("gives plain lua5.4 the build of scripts/build: a thread per core (OpenMP), dle.dist with MPI", function()
    local cores = tonumber((sh("nproc")))
    -- OMP_NUM_THREADS would override the default thread count; the check is of the default
    local out, status = sh(path_env .. "\ncd / && env -u OMP_NUM_THREADS lua5.4 -e " ..
      q('local dle = require("dle"); local ok, why = dle.dist.is_available(); ' ..
        'print(dle.get_num_threads(), ok, why, package.searchpath("dle.dist_native", package.cpath))'))
    assert.are.equal(0, status, out)
    local threads, available, _, native = out:match("^(%d+)\t(%a+)\t([^\t]*)\t([^\t\n]*)\n$")
    assert.are.equal(cores, tonumber(threads), out)
    if os.execute("command -v mpicc >/dev/null 2>&1") then
      assert.are.equal("true", available, out)
      assert.are.equal(tree .. "/lib/lua/5.4/dle/dist_native.so", native, out)
    end
  end)

  it("runs docs/building.md's LuaRocks commands on the installed tree: luarocks path, lua5.4 -e, bin/dle", function()
    local script, make = {}, nil
    for _, c in ipairs((require("doc_commands").extract_all(root))) do
      if c.file == "docs/building.md" and c.section == "LuaRocks" then
        if c.cmd:match("^luarocks .* make ") then make = c.cmd
        else script[#script + 1] = (c.cmd:gsub("/tmp/dletree", tree)) end
      end
    end
    -- the make is lazy_setup's, run in a copy of the sources (build-rock/ stays out of the checkout)
    assert.are.equal("luarocks --lua-version 5.4 make " .. ROCKSPEC .. " --tree /tmp/dletree", make)
    assert.are.equal(3, #script, table.concat(script, "\n"))
    local out, status = sh("cd " .. q(root) .. " && " .. table.concat(script, " && "))
    assert.are.equal(0, status, out)
    assert.truthy(out:find("[dle.Tensor float32 of size 2x2]", 1, true), out)   -- lua5.4 -e '... ones(2, 2)'
    assert.truthy(out:find("add: shapes {2,3} and {4}", 1, true), out)          -- examples/tour.lua
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
    f:write('local dle = require("dle")\nprint(arg[0] ~= nil, arg[1], select("#", ...), dle.zeros(3):numel())\n')
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
