-- bench_spec.lua — smoke test of the benchmark harness: build/bin/bench_ref prints one parseable
-- line per task, and `scripts/bench --quick --json FILE` (restricted to a few cheap figures with
-- --filter) prints a well-formed table and writes JSON in which every row has a figure, dle's
-- median [min..max] and, per reference, a ratio or a "skipped" note. No timing is asserted.
local json = require("dkjson")
local H = require("helpers")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local build = os.getenv("DLE_BUILD") or (root .. "/build")
-- Under `scripts/test --asan`, child processes inherit libasan through LD_PRELOAD: no Python then.
local asan = (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true) ~= nil

local q = H.shell_quote

-- Runs a shell command; returns stdout, stderr and the exit status.
local function run(cmd)
  local err = os.tmpname()
  local p = assert(io.popen(cmd .. " 2>" .. q(err)))
  local out = p:read("a")
  local _, _, status = p:close()
  local f = assert(io.open(err))
  local e = f:read("a")
  f:close()
  os.remove(err)
  return out, e, status
end

local function slurp(path) return (assert(H.read_file(path), path)) end

local function bench(args)
  return run(q(root .. "/scripts/bench") .. " " .. args)
end

-- checks a {median, min, max, reps} record
local function assert_stats(s, what)
  assert.is_table(s, what)
  assert.is_number(s.median, what)
  assert.truthy(s.min <= s.median and s.median <= s.max, what .. ": min <= median <= max")
  assert.truthy(s.min > 0, what .. ": positive")
end

describe("bench_ref (the C reference)", function()
  local exe = build .. "/bin/bench_ref"

  it("prints `task median min max iterations unit` for sgemm, transposed sgemm, copy, triad and the Lua floor",
     function()
    local out, err, status = run(q(exe) .. " --threads 1 --reps 5 --target 0.001 sgemm:64:48:32 sgemm_tn:32:48:16 " ..
        "copy:100000 triad:100000 lua_object:1")
    assert.are.equal(0, status, err)
    local units = {}
    for line in out:gmatch("[^\n]+") do
      local task, med, mn, mx, it, unit = line:match("^(%S+) (%S+) (%S+) (%S+) (%d+) (%S+)$")
      if task then
        units[task] = unit
        med, mn, mx = tonumber(med), tonumber(mn), tonumber(mx)
        assert.truthy(mn > 0 and mn <= med and med <= mx, line)
        assert.truthy(tonumber(it) >= 1, line)
      end
    end
    assert.are.same({["sgemm:64:48:32"] = "GFLOP/s", ["sgemm_tn:32:48:16"] = "GFLOP/s", ["copy:100000"] = "GB/s",
                     ["triad:100000"] = "GB/s", ["lua_object:1"] = "us"}, units)
  end)

  it("reports a bad task and a bad option instead of crashing", function()
    local out, _, status = run(q(exe) .. " --reps 5 --target 0.001 sgemm:0:1:1 fft:8")
    assert.are_not.equal(0, status)
    assert.truthy(out:find("sgemm:0:1:1 error", 1, true), out)
    assert.truthy(out:find("fft:8 error unknown task kind fft", 1, true), out)
    local _, err, status2 = run(q(exe) .. " --threads 0 copy:10")
    assert.are.equal(2, status2)
    assert.truthy(err:find("--threads", 1, true), err)
  end)
end)

describe("timing.settle (the dle side's calls before timing, until its memory use is steady)", function()
  package.path = root .. "/?.lua;" .. package.path
  local timing = require("bench.timing")
  local frozen = function() return 0 end

  -- A loop whose results (`result` bytes each) pile up as garbage until memory reaches `limit`,
  -- when a collection brings it back to `live`, as Lua's collector paced by lua_core.c does.
  local function piling(live, result, limit)
    local mem, calls, collections = live, 0, {}
    local function body()
      calls = calls + 1
      if mem + result > limit then
        mem = live
        collections[#collections + 1] = calls
      end
      mem = mem + result
    end
    return body, function() return mem end, collections
  end

  it("keeps calling past the first collection and stops at the second one", function()
    -- 256 KB results, 64 MB limit: the first collection only comes at call 256
    local body, memory, collections = piling(2e6, 256 * 1024, 64 * 1024 * 1024)
    local calls = timing.settle(body, memory, frozen)
    assert.are.equal(2, #collections)
    assert.truthy(collections[1] > 200, collections[1])
    assert.are.equal(collections[2], calls)
  end)

  it("stops after 3 calls when memory does not grow, or grows by less than 64 KiB a call", function()
    assert.are.equal(3, timing.settle(function() end, function() return 1e6 end, frozen))
    local body, memory = piling(1e6, 1000, 1e12)
    assert.are.equal(3, timing.settle(body, memory, frozen))
  end)

  it("gives up after 3 s, or after 4096 calls, when memory keeps growing", function()
    local body, memory = piling(0, 1e6, math.huge)
    local t = 0
    local calls = timing.settle(body, memory, function() t = t + 0.1 return t end)
    assert.truthy(calls >= 29 and calls <= 31, calls)
    assert.are.equal(4096, timing.settle(body, memory, frozen))
  end)
end)

describe("timing.combine (a figure measured in rounds alternating with its references)", function()
  local timing = require("bench.timing")

  it("gives the median of the rounds' medians, the extreme min and max and every repetition", function()
    local c = timing.combine({{median = 3, min = 2, max = 9, reps = 7, iters = 10},
                              {median = 1, min = 0.5, max = 1.5, reps = 7, iters = 10},
                              {median = 2, min = 1.8, max = 2.2, reps = 7, iters = 10}})
    assert.are.same({median = 2, min = 0.5, max = 9, reps = 21, iters = 10, rounds = 3}, c)
  end)

  it("combines each reference over the rounds, keeping a reference some round skipped as it first was", function()
    local references = require("bench.references")
    local function round(t, r) return {{label = "torch", seconds = {median = t}}, {label = "C", rate = {median = r}},
                                       {label = "gone", skipped = "--no-ref"}} end
    local sum = function(list) local m = 0 for _, s in ipairs(list) do m = m + s.median end return {median = m} end
    local out = references.combine_rounds({round(1, 10), round(2, 20)}, sum)
    assert.are.same({{label = "torch", seconds = {median = 3}}, {label = "C", rate = {median = 30}},
                     {label = "gone", skipped = "--no-ref"}}, out)
    local partial = references.combine_rounds({round(1, 10),
        {{label = "torch", skipped = "error"}, {label = "C", rate = {median = 5}}, {label = "gone", skipped = "x"}}},
            sum)
    assert.are.same({label = "torch", seconds = {median = 1}}, partial[1])
    assert.are.same({label = "C", rate = {median = 15}}, partial[2])
    local late = references.combine_rounds({{{label = "torch", skipped = "error"}},
                                            {{label = "torch", seconds = {median = 2}}}}, sum)
    assert.are.same({{label = "torch", skipped = "error"}}, late)
  end)

  it("returns a single round unchanged", function()
    local s = {median = 1, min = 1, max = 1, reps = 5, iters = 3}
    assert.are.equal(s, timing.combine({s}))
  end)
end)

describe("the PyTorch side's request protocol (bench/references.lua, with a fake interpreter)", function()
  package.path = root .. "/?.lua;" .. package.path
  local references = require("bench.references")

  -- An executable shell script standing in for python3: `python script threads target reps`.
  local function fake_python(body)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("#!/bin/sh\n", body, "\n")
    f:close()
    assert(os.execute("chmod +x " .. q(path)))
    return path
  end

  it("reads the version, then one answer per request; an ERROR answer becomes {error}", function()
    local py = fake_python([[
echo "VERSION 9.9 $2 $3 $4"
read req; echo "some warning"; echo "fig1 0.5 0.25 1 7"
read req; echo "fig2 ERROR no such op"]])
    local server, note = references.torch_server(py, "script.py", 2, 0.05, 5)
    os.remove(py)
    assert.is_nil(note)
    assert.are.equal("9.9 2 0.05 5", server.version)
    assert.are.same({median = 0.5, min = 0.25, max = 1, iters = 7, reps = 5},
                    server.measure({key = "fig1", setup = "", body = "pass"}))
    assert.are.same({error = "no such op"}, server.measure({key = "fig2", setup = "", body = "pass"}))
    server.close()
  end)

  it("turns a process that dies into errors instead of hanging or crashing", function()
    local py = fake_python('echo "VERSION 1"; read req; exit 3')
    local server = references.torch_server(py, "script.py", 1, 0.05, 5)
    os.remove(py)
    for _, key in ipairs({"a", "b"}) do
      local r = server.measure({key = key, setup = "", body = "pass"})
      assert.truthy(r.error and r.error:find("exited", 1, true), key)
    end
    server.close()
  end)

  it("reports an interpreter without torch as a note", function()
    local py = fake_python('echo "NOTORCH No module named torch"')
    local server, note = references.torch_server(py, "script.py", 1, 0.05, 5)
    os.remove(py)
    assert.is_nil(server)
    assert.truthy(note:find("No module named torch", 1, true), note)
  end)
end)

describe("scripts/bench", function()
  it("--quick --json: a table and JSON rows with a figure, dle's value and a ratio or a skipped note", function()
    local path = os.tmpname()
    local figures = "add_1elem,matmul_512,train_mlp"
    local out, err, status = bench("--quick --threads 1 --filter " .. figures .. " --json " .. q(path)
                                   .. (asan and " --no-ref" or ""))
    assert.are.equal(0, status, err)
    -- the table: a header, a separator, then rows of 7 cells
    local lines = {}
    for line in out:gmatch("[^\n]+") do
      if line:sub(1, 1) == "|" then lines[#lines + 1] = line end
    end
    assert.truthy(lines[1]:find("| figure", 1, true), out)
    assert.truthy(lines[2]:match("^|%-[-|]+|$"), out)
    for i = 3, #lines do
      local cells = select(2, lines[i]:gsub("|", "|")) - 1
      assert.are.equal(7, cells, lines[i])
    end
    for _, name in ipairs({"c = a + b, 1-element float32", "matmul 512x512 @ 512x512",
                           "projected epoch (469 steps)"}) do
      assert.truthy(out:find(name, 1, true), name .. " missing from\n" .. out)
    end

    local doc, _, jerr = json.decode(slurp(path))
    os.remove(path)
    assert.is_table(doc, jerr)
    assert.are.equal("quick", doc.mode)
    assert.truthy(doc.reps >= 5)
    local keys = {}
    for _, row in ipairs(doc.rows) do
      keys[#keys + 1] = row.key
      assert.is_string(row.name)
      assert.is_string(row.unit)
      assert.are.equal(1, row.threads)
      assert_stats(row.dle, row.key)
      assert.truthy(row.dle.reps >= 5, row.key)
      assert.truthy(#row.references >= 1, row.key)
      for _, ref in ipairs(row.references) do
        assert.is_string(ref.label)
        if ref.value then
          assert_stats(ref.value, row.key .. " / " .. ref.label)
          assert.is_number(ref.ratio)
        else
          assert.is_string(ref.skipped, row.key .. " / " .. ref.label .. ": neither a value nor a skipped note")
        end
      end
    end
    table.sort(keys)
    assert.are.same({"add_1elem", "matmul_512", "train_mlp", "train_mlp_compiled", "train_mlp_compiled_epoch",
      "train_mlp_epoch"}, keys)
  end)

  it("--no-ref marks every reference skipped", function()
    local path = os.tmpname()
    local _, err, status = bench("--quick --threads 1 --no-ref --filter add_1elem --json " .. q(path))
    assert.are.equal(0, status, err)
    local doc = json.decode(slurp(path))
    os.remove(path)
    assert.are.equal(1, #doc.rows)
    for _, ref in ipairs(doc.rows[1].references) do
      assert.are.equal(false, ref.value)
      assert.are.equal("--no-ref", ref.skipped)
    end
  end)

  it("skips the PyTorch references with a printed note when torch cannot be imported", function()
    local path = os.tmpname()
    local out, err, status = run("DLE_BENCH_PYTHON=/bin/false " .. q(root .. "/scripts/bench")
                                 .. " --quick --threads 1 --filter add_1elem --json " .. q(path))
    assert.are.equal(0, status, err)
    assert.truthy(out:find("# note: PyTorch is not importable by /bin/false", 1, true), out)
    local doc = json.decode(slurp(path))
    os.remove(path)
    local ref = doc.rows[1].references[1]
    assert.are.equal(false, ref.value)
    assert.are.equal("PyTorch not available", ref.skipped)
    assert.truthy(out:find("skipped: PyTorch not available", 1, true), out)
  end)

  it("--markdown=FILE appends one dated run (heading, command, description, table) and keeps earlier ones", function()
    local path = os.tmpname()
    H.write_file(path, "# earlier runs\n")
    for _ = 1, 2 do
      local _, err, status = bench("--quick --threads 1 --no-ref --filter add_1elem --markdown=" .. q(path))
      assert.are.equal(0, status, err)
    end
    local text = slurp(path)
    os.remove(path)
    assert.truthy(text:find("^# earlier runs\n"), text)
    local headings = {}
    for h in text:gmatch("\n## (%d%d%d%d%-%d%d%-%d%d %d%d:%d%d UTC on [^\n]+)") do headings[#headings + 1] = h end
    assert.are.equal(2, #headings, text)
    assert.truthy(text:find("`scripts/bench --quick --threads 1 --no-ref --filter add_1elem --markdown=", 1, true),
                  text)
    assert.truthy(text:find("\n%- machine: "), text)
    local _, rows = text:gsub("\n| c = a %+ b, 1%-element float32", "")
    assert.are.equal(2, rows, text)
  end)

  it("rejects bad options with a message and status 2", function()
    for _, args in ipairs({"--threads 0", "--filter no_such_figure", "--frobnicate", "--json", "--markdown="}) do
      local _, err, status = bench(args)
      assert.are.equal(2, status, args)
      assert.truthy(err:find("bench: ", 1, true), args .. ": " .. err)
    end
  end)
end)
