-- file_fuzz_spec.lua — a short seeded round of the file fuzzer (tests/fuzz/file_fuzz.lua): 400
-- mutated dle, npy, safetensors, IDX and ONNX files, loaded by child processes under a time and a
-- memory limit. Each must load or raise an error beginning with its loader's name; a crash, a
-- sanitizer report (under scripts/test --asan), a time-out or an unnamed error fails the test
-- and leaves a reproducer in the output directory. The full round, under ASan, any seed:
--   tests/fuzz/files --seed 7 --count 100000
local fuzz = require("fuzz.file_fuzz")
local tmpdir = require("helpers").tmpdir

local function report(failures)
  local lines = {}
  for k, f in ipairs(failures) do
    if k > 10 then lines[#lines + 1] = "..."; break end
    lines[#lines + 1] = string.format("case %d (%s): %s [%s]", f.i, f.name, f.reason:sub(1, 300), f.file)
  end
  return table.concat(lines, "\n")
end

describe("file fuzzer", function()
  it("classifies loads: values and named errors pass; unnamed errors, crashes and hangs fail", function()
    local dir, out = tmpdir(), tmpdir()
    local fz = fuzz.new({seed = 1, out = out, batch_seconds = 3, mem = 2048})
    fz.failures, fz.stats = {}, {ok = 0, errors = 0, by = {}}
    local cases = {}
    for i, body in ipairs({"ok", "named", "unnamed", "ok", "exit", "named", "hang", "ok"}) do
      local path = dir .. "/s" .. i .. ".txt"
      local f = assert(io.open(path, "w"))
      f:write(body)
      f:close()
      cases[i] = {i = i, name = "selftest", path = path, bytes = body}
    end
    local k = 1
    while k <= #cases do k = fz:run_child(cases, k, dir) end
    local got = {}
    for _, f in ipairs(fz.failures) do got[f.i] = f.reason:match("^[^\n]*") end
    assert.are.same({3, 5, 7},
                    (function() local l = {} for i in pairs(got) do l[#l + 1] = i end table.sort(l) return l end)())
    assert.truthy(got[3]:find("^error not naming selftest: .*attempt to index a nil value"), got[3])
    assert.are.equal("exit status 3", got[5])
    assert.are.equal("killed: time-out", got[7])
    assert.are.equal(3, fz.stats.ok)
    assert.are.equal(3, fz.stats.errors)
    -- the reproducer of each failure: the file and the reason
    local f = assert(io.open(out .. "/case-1-5.txt", "rb"))
    assert.are.equal("exit", f:read("a"))
    f:close()
    os.execute("rm -rf '" .. dir .. "' '" .. out .. "'")
  end)

  it("400 seeded mutated files of every format load or raise errors naming their loader", function()
    local dir, out = tmpdir(), tmpdir()
    local fz = fuzz.new({seed = 20260601, count = 400, from = 1, batch = 200, mem = 2048, out = out})
    local failures = fz:run(dir)
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(400, fz.stats.files)
    -- both outcomes happen: the mutations are neither all harmless nor all fatal
    assert.is_true(fz.stats.ok > 20, "too few files loaded: " .. fz.stats.ok)
    assert.is_true(fz.stats.errors > 200, "too few files were rejected: " .. fz.stats.errors)
    assert.are.equal(0, #failures, report(failures))
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("has a seed maker, a loader and an error prefix for every format; one entry adds a format", function()
    for _, name in ipairs({"dle", "npy", "safetensors", "idx"}) do
      local f = fuzz.formats[name]
      assert.are.equal("function", type(f.make_seed), name)
      assert.are.equal("function", type(f.load), name)
      assert.are.equal("string", type(f.name), name)
    end
    fuzz.formats.toy = {ext = "toy", name = "toy.load", tokens = {"TOY"}, load = function() return 1 end,
      make_seed = function(r) return "TOY" .. string.rep("\1", r(8)) end}
    local fz = fuzz.new({seed = 3, formats = "toy"})
    local dir = tmpdir()
    local name, bytes = fz:case(1, dir)
    assert.are.equal("toy", name)
    assert.are.equal("string", type(bytes))
    fuzz.formats.toy = nil
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
