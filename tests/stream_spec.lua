--- stream_spec.lua — the streaming-store paths of large outputs (kernels/cpu/cpu_stream.h) write
-- exactly what the cached paths write: softmax / log_softmax rows, layer_norm rows, the AVX2
-- unary maps and the tiled transposed elementwise loops, at 1 and 2 threads.
-- Two ways: (1) outputs above the default threshold (8 MiB) against the same op over small pieces
-- (cached stores); (2) a child process with DLE_STREAM_BYTES=0, where every output streams, runs
-- odd shapes (rows of every length, unaligned row starts, tails, transposed and sliced inputs)
-- and must print the same bits as this process, where those small outputs use cached stores.
local dle = require("dle")
local F = dle.nn.functional

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

-- Largest |a - b| (0 when the tensors hold the same values; NaN-free inputs).
local function max_diff(a, b)
  assert.same(a:shape(), b:shape())
  return (a:double() - b:double()):abs():max():item()
end

-- The op over row blocks of `rows` rows each, concatenated (every block is a small output).
local function by_blocks(x, rows, f)
  local parts = {}
  for r = 1, x:shape()[1], rows do
    parts[#parts + 1] = f(x:narrow(1, r, math.min(rows, x:shape()[1] - r + 1)))
  end
  return dle.cat(parts, 1)
end

for _, threads in ipairs({1, 2}) do
  describe(("large outputs at %d thread(s)"):format(threads), function()
    local saved
    setup(function()
      saved = dle.get_num_threads()
      dle.set_num_threads(threads)
    end)
    teardown(function() dle.set_num_threads(saved) end)

    it("softmax and log_softmax over 2100 rows of 1023 (8.6 MB, unaligned rows) equal the small-block results",
       function()
      dle.manual_seed(11)
      local x = dle.randn(2100, 1023) * 5
      for _, op in ipairs({"softmax", "log_softmax"}) do
        local big = x[op](x, 2)
        local small = by_blocks(x, 100, function(b) return b[op](b, 2) end)
        assert.equal(0, max_diff(big, small), op)
      end
    end)

    it("layer_norm over 2100 rows of 1023 equals the small-block results", function()
      dle.manual_seed(12)
      local x, w, b = dle.randn(2100, 1023), dle.randn(1023), dle.randn(1023)
      local big = F.layer_norm(x, w, b)
      local small = by_blocks(x, 100, function(r) return F.layer_norm(r, w, b) end)
      assert.equal(0, max_diff(big, small))
    end)

    it("exp, tanh and gelu of 2.2M contiguous floats equal the results of 100K-element pieces", function()
      dle.manual_seed(13)
      local x = dle.randn(22, 100003) * 3
      for _, op in ipairs({"exp", "tanh", "gelu"}) do
        local big = x[op](x)
        local small = by_blocks(x, 1, function(r) return r[op](r) end)
        assert.equal(0, max_diff(big, small), op)
      end
    end)

    it("a:t() + b, a:t() * b and exp(a:t()) over 1500x1501 equal the results on contiguous copies", function()
      dle.manual_seed(14)
      local a, b = dle.randn(1501, 1500), dle.randn(1500, 1501)
      local at = a:t()
      local ac = at:contiguous()
      assert.equal(0, max_diff(at + b, ac + b), "add")
      assert.equal(0, max_diff(at * b, ac * b), "mul")
      assert.equal(0, max_diff(at:exp(), ac:exp()), "exp")
    end)

    -- cpu_iter_copy_transposed takes outputs below 4 MB, run_tiled the larger ones
    it("x:t():contiguous() puts every element in place below and above the 4 MB direct-copy bound", function()
      for _, rc in ipairs({{700, 731}, {1100, 1001}, {2049, 1030}}) do
        local r, c = rc[1], rc[2]
        local x = dle.arange(r * c):view(r, c)   -- float32, exact below 2^24
        local want = dle.arange(c):view(c, 1) + dle.arange(r):view(1, r) * c
        assert.is_true(x:t():contiguous():equal(want), ("%dx%d"):format(r, c))
      end
    end)
  end)
end

-- Small odd cases computed by CODE (a chunk taking dle, returning {name = tensor}); printed as
-- exact hex floats.
local CODE = [[
local dle, threads = ...
dle.set_num_threads(threads)
dle.manual_seed(5)
local F = dle.nn.functional
local out = {}
for _, n in ipairs({1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 511, 1023, 8193}) do
  local x = dle.randn(5, n) * 4
  out["softmax " .. n] = x:softmax(2)
  out["log_softmax " .. n] = x:log_softmax(2)
  out["softmax of rows with a gap " .. n] = x:narrow(2, 1, math.max(1, n - 1)):softmax(2)
  local w, b = dle.randn(n), dle.randn(n)
  out["layer_norm " .. n] = dle.nn.functional.layer_norm(x, w, b)
end
out["softmax 40x1023 (threads)"] = (dle.randn(40, 1023) * 3):softmax(2)
local big = dle.randn(40003)
out["exp"] = big:exp()
out["tanh of an unaligned slice"] = big:narrow(1, 2, 40001):tanh()
for _, s in ipairs({{70, 90}, {9, 130}, {200, 301}}) do
  local a, b = dle.randn(s[2], s[1]), dle.randn(s[1], s[2])
  local key = s[1] .. "x" .. s[2]
  out["add_t " .. key] = a:t() + b
  out["mul_t " .. key] = a:t() * b
  out["exp_t " .. key] = a:t():exp()
  out["add_t of a slice " .. key] = a:t():narrow(2, 2, s[2] - 1) + b:narrow(2, 1, s[2] - 1)
end
-- every input transposed, 3 x 530 rows: 9 tall bands when streamed (the last 18 rows), 300 columns
local a3 = dle.randn(3, 300, 530)
out["exp_t 3x530x300 (tall bands)"] = a3:transpose(2, 3):exp()
out["a:t() + a:t() 3x530x300 (tall bands)"] = a3:transpose(2, 3) + a3:transpose(2, 3) * 2
out["a:t():contiguous() 3x530x300 (tall bands)"] = a3:transpose(2, 3):contiguous()
local keys = {}
for k in pairs(out) do keys[#keys + 1] = k end
table.sort(keys)
local lines = {}
for _, k in ipairs(keys) do
  local v = out[k]:contiguous():view(-1):totable()
  for i = 1, #v do v[i] = string.format("%a", v[i]) end
  lines[#lines + 1] = k .. ": " .. table.concat(v, " ")
end
return table.concat(lines, "\n")
]]

describe("every output streamed (DLE_STREAM_BYTES=0)", function()
  for _, threads in ipairs({1, 2}) do
    it(("writes the bits cached stores write, at %d thread(s)"):format(threads), function()
      local saved = dle.get_num_threads()
      local want = assert(load(CODE))(dle, threads)
      dle.set_num_threads(saved)
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write("io.write((function(...)\n", CODE, "\nend)(require('dle'), ", threads, "))\n")
      f:close()
      local p = assert(io.popen(string.format("DLE_STREAM_BYTES=0 '%s' '%s' 2>&1", root .. "/scripts/dle", path)))
      local got = p:read("a")
      p:close()
      os.remove(path)
      local gl, wl = {}, {}
      for l in got:gmatch("[^\n]+") do gl[#gl + 1] = l end
      for l in want:gmatch("[^\n]+") do wl[#wl + 1] = l end
      assert.equal(#wl, #gl, "line count (child output: " .. got:sub(1, 300) .. ")")
      for i = 1, #wl do
        if gl[i] ~= wl[i] then
          assert.equal(wl[i]:match("^[^:]*"), gl[i]:match("^[^:]*"))
          error("streamed result differs: " .. wl[i]:match("^[^:]*"))
        end
      end
    end)
  end
end)
