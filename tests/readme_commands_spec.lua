-- readme_commands_spec.lua — every shell command README.md and docs/*.md show (as
-- tests/doc_commands.lua finds them: shell blocks, `$ ` transcripts, examples named inline) is run
-- here, or is listed in NOT_RUN with the reason. Each runs from the checkout's root as the docs
-- mean, but inside a scratch checkout made of symlinks to this one, so what it writes (runs/)
-- stays out of the real checkout; stdin is /dev/null, and it must exit 0 within TIMEOUT_S. A
-- transcript of the REPL is replayed: its `dle>`/`>>` lines go to scripts/dle through a pipe and
-- the output must be the transcript's.
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

local TIMEOUT_S = 120 -- per command: a hang fails instead of stalling the suite

-- Commands not run, with the reason.
local NOT_RUN = {
  ["scripts/bootstrap"] = "installs Debian packages with apt and builds: the suite itself runs after it (.ci/run)",
  ["scripts/test"] = "the whole suite, which includes this spec (no recursion)",
  -- docs/building.md's LuaRocks block: a second full build here would double the suite's longest step
  ["luarocks --lua-version 5.4 make rockspec/dle-scm-1.rockspec --tree /tmp/dletree"] =
    "run by tests/rockspec_spec.lua (#rock), in a copy of the sources, into a temporary tree",
  ['eval "$(luarocks --lua-version 5.4 --tree /tmp/dletree path)"'] = "run by tests/rockspec_spec.lua on its tree",
  ["lua5.4 -e 'print(require(\"dle\").ones(2, 2))'"] = "run by tests/rockspec_spec.lua on its tree",
  ["/tmp/dletree/bin/dle examples/tour.lua"] = "run by tests/rockspec_spec.lua on its tree",
}

-- Commands run in a shorter form, with the reason.
local RUN_AS = {
  ["scripts/dle examples/fashion_mnist/mlp.lua"] = {
    "scripts/dle examples/fashion_mnist/mlp.lua --epochs 1",
    "one epoch instead of five: the same code path (data, training, progress, log and curve) in a fifth of the time",
  },
}

-- A line the output must hold, where checking it is cheap.
local EXPECT = {
  ["scripts/dle examples/fashion_mnist/mlp.lua"] = "curves: runs/fashion_mnist_mlp.svg",
  ["scripts/dle examples/tour.lua"] = "add: shapes {2,3} and {4} cannot be broadcast",
  ["scripts/dle examples/rewrite_tour.lua"] = "traces\t2\treplays\t2",
  ["mpirun --allow-run-as-root -np 2 scripts/dle examples/fashion_mnist/ddp.lua"] = "2 ranks",
}

local doc = require("doc_commands")
local H = require("helpers")
local q = H.shell_quote
local commands, transcripts = doc.extract_all(root)

-- Runs a shell command from dir; returns its output (stdout and stderr) and exit status.
local function sh(cmd, dir)
  local p = assert(io.popen("cd " .. q(dir) .. " && " .. cmd .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
end

describe("the commands of README.md and docs/*.md", function()
  local scratch

  lazy_setup(function()
    scratch = os.tmpname()
    os.remove(scratch)
    -- every top-level entry of the checkout but runs/ (what the examples write)
    local out, status = sh(string.format("mkdir -p %s && for f in * .[!.]*; do [ \"$f\" = runs ] || " ..
                                         "ln -s \"$PWD/$f\" %s/; done", q(scratch), q(scratch)), root)
    assert(status == 0, out)
  end)

  lazy_teardown(function()
    if scratch and scratch:match("^/tmp/") then sh("rm -rf " .. q(scratch), "/") end
  end)

  it("are found: README's first commands, the LuaRocks block, the examples in prose, a REPL transcript", function()
    local set = H.index_by(commands, "cmd", true)
    for _, cmd in ipairs({"scripts/bootstrap", "scripts/dle examples/fashion_mnist/mlp.lua", "scripts/test",
                          "scripts/dle examples/tour.lua",
                          "luarocks --lua-version 5.4 make rockspec/dle-scm-1.rockspec --tree /tmp/dletree"}) do
      assert.truthy(set[cmd], cmd .. " not found")
    end
    assert.truthy(#transcripts >= 1)
  end)

  it("list only commands the docs still show, in NOT_RUN, RUN_AS and EXPECT", function()
    local set = H.index_by(commands, "cmd", true)
    local stale = {}
    for _, t in ipairs({NOT_RUN, RUN_AS, EXPECT}) do
      for cmd in pairs(t) do
        if not set[cmd] then stale[#stale + 1] = cmd end
      end
    end
    table.sort(stale)
    assert.are.same({}, stale)
  end)

  for _, c in ipairs(commands) do
    local why_not = NOT_RUN[c.cmd]
    if why_not then
      pending(string.format("not run: `%s` (%s): %s", c.cmd, c.file, why_not))
    else
      local run_as = RUN_AS[c.cmd]
      local cmd = run_as and run_as[1] or c.cmd
      local name = string.format("`%s` (%s) exits 0", c.cmd, c.file)
      if run_as then name = name .. string.format(", run as `%s`: %s", cmd, run_as[2]) end
      if EXPECT[c.cmd] then name = name .. " and prints " .. string.format("%q", EXPECT[c.cmd]) end
      it(name, function()
        local out, status = sh(string.format("timeout %d %s < /dev/null", TIMEOUT_S, cmd), scratch)
        assert.are.equal(0, status, out)
        if EXPECT[c.cmd] then assert.truthy(out:find(EXPECT[c.cmd], 1, true), out) end
      end)
    end
  end

  for _, t in ipairs(transcripts) do
    it(string.format("replay the REPL transcript of %s (%d lines in): the same output", t.file, #t.input), function()
      local input = os.tmpname()
      local f = assert(io.open(input, "w"))
      f:write(table.concat(t.input, "\n"), "\n")
      f:close()
      local out, status = sh(string.format("timeout %d %s < %s", TIMEOUT_S, t.cmd, q(input)), scratch)
      os.remove(input)
      assert.are.equal(0, status, out)
      assert.are.equal(table.concat(t.output, "\n") .. "\n", out)
    end)
  end
end)
