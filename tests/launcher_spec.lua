--- launcher_spec.lua — the dle command (lua/dle/launcher.lua through scripts/dle, the same code
-- as the installed bin/dle): API.md's flags --help, --version, --threads, --seed, -e, -i, --nproc,
-- script arguments (dashes included) left to the script, unknown options refused with status 1.
local H = require("helpers")
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local dle_cmd = root .. "/scripts/dle"
local dir = H.tmpdir()

local q = H.shell_quote
-- output (stdout and stderr) and exit status of `dle args` (stdin from input when given)
local function dle(args, input)
  local cmd = q(dle_cmd) .. " " .. args .. " 2>&1"
  if input then cmd = "printf " .. q(input) .. " | " .. cmd end
  local p = io.popen(cmd .. "; echo \"exit=$?\"")
  local out = p:read("a")
  p:close()
  local status = tonumber(out:match("exit=(%d+)\n$"))
  return out:gsub("exit=%d+\n$", ""), status
end

describe("the dle launcher", function()
  it("--help lists the options and --version prints dle's version", function()
    local out, st = dle("--help")
    assert.are.equal(0, st)
    for _, flag in ipairs({"--threads", "--seed", "-e", "-i", "--nproc", "--version"}) do
      assert.truthy(out:find(flag, 1, true), flag .. " missing from:\n" .. out)
    end
    local v = dle("--version")
    assert.matches("^dle %d+%.%d+%.%d+", v)
  end)

  it("--threads and --seed set the thread count and the generator before the chunk runs", function()
    local chunk = 'local dle = require("dle"); print(dle.get_num_threads(), dle.randn(3):sum():item())'
    local out = dle("--threads 1 --seed 42 -e " .. q(chunk))
    local ref = dle("-e " .. q('local dle = require("dle"); dle.manual_seed(42); print(dle.randn(3):sum():item())'))
    assert.are.equal("1", out:match("^(%d+)\t"))
    assert.are.equal(ref:match("^(%S+)"), out:match("\t(%S+)"))
  end)

  it("passes everything after the script to it, dashes included; -e's chunk gets the rest as ...", function()
    local script = dir .. "/args.lua"
    H.write_file(script, 'print(arg[0] ~= nil, select("#", ...), ...)\n')
    local out, st = dle(q(script) .. " --threads x -e y")
    assert.are.equal(0, st, out)
    assert.are.equal("true\t4\t--threads\tx\t-e\ty\n", out)
    assert.are.equal("a\tb\n", (dle("-e " .. q("print(...)") .. " a b")))
  end)

  it("-i enters the REPL after the chunk, which reads stdin", function()
    local out = dle("-i -e " .. q("x = 20"), "=x + 1\n")
    assert.truthy(out:find("21", 1, true), out)
  end)

  it("an unknown option or a bad value is an error naming dle, with status 1", function()
    local out, st = dle("--bogus")
    assert.are.equal(1, st)
    assert.matches("dle: unknown option '%-%-bogus'", out)
    out, st = dle("--threads 0 -e 'print(1)'")
    assert.are.equal(1, st)
    assert.matches("dle: %-%-threads must be a positive integer", out)
    out, st = dle("-e 'error(\"boom\")'")
    assert.are.equal(1, st)
    assert.truthy(out:find("boom", 1, true))
  end)

  local has_mpi = os.execute("command -v mpirun >/dev/null 2>&1")
  local name = "--nproc 2 runs the script on two ranks through mpirun"
  if not has_mpi then pending(name .. " (needs mpirun: Debian openmpi-bin)"); return end
  it(name, function()
    local script = dir .. "/ranks.lua"
    H.write_file(script, 'print("rank " .. (os.getenv("OMPI_COMM_WORLD_RANK") or "?"), ...)\n')
    local out, st = dle("--nproc 2 " .. q(script) .. " z")
    assert.are.equal(0, st, out)
    assert.truthy(out:find("rank 0\tz", 1, true), out)
    assert.truthy(out:find("rank 1\tz", 1, true), out)
  end)
end)

describe("the REPL's own spellings", function()
  it("=expr prints, locals persist between lines, local functions too, help(f) prints the doc", function()
    local out = dle("", "local y = 5\ny\n=y * 2\nlocal function sq(a) return a * a end\nsq(3)\n"
                        .. "local a <const>, b = 1, 2\na + b\nhelp('dle.zeros')\n")
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.same({"5", "10", "9", "3"}, {lines[1], lines[2], lines[3], lines[4]})
    assert.truthy(out:find("Returns a tensor filled with zeros", 1, true), out)
  end)
end)
