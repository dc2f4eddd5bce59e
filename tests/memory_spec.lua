-- memory_spec.lua — tensor memory is accounted and released: by __gc after collection, at scope
-- exit with `<close>`, kept alive by views, and bounded in allocation loops because native memory
-- pressure triggers Lua's collector (Lua itself only sees small userdata).
-- Its tensors are held only to take up memory and dropped (`t = nil`) only so that a collection
-- can free them, which luacheck calls unused:
-- luacheck: ignore 211 231 241 311
local dle = require("dle")
local H = require("helpers")

local MB = 1024 * 1024
local N1MB = MB // 4   -- float32 elements in 1 MB

local function full_gc()
  collectgarbage()
  collectgarbage()
end

local function allocated() return dle.core.memory_allocated() end

-- Allocates n dropped 1 MB tensors with Lua's own collector stopped, so only native memory
-- pressure collects them; returns the most memory in use above the start meanwhile.
local function garbage_peak(n)
  local base, peak = allocated(), 0
  collectgarbage("stop")
  for i = 1, n do
    local t = dle.empty(N1MB)   -- empty: the pacing is under test, not the fill speed
    t[1] = i
    peak = math.max(peak, allocated() - base)
  end
  collectgarbage("restart")
  return peak
end

describe("memory", function()
  before_each(full_gc)

  it("counts the bytes of new storages and not of views", function()
    local base = allocated()
    local t = dle.zeros(N1MB)
    assert.are.equal(base + MB, allocated())
    local views = {t:view(512, 512), t:narrow(1, 1, 10), t:view(-1, 2):t(), t[1] and t:select(1, 3)}
    assert.are.equal(base + MB, allocated())
    local d = dle.zeros(1000, {dtype = "float64"})
    assert.are.equal(base + MB + 8000, allocated())
    assert.are.equal(4, #views)
    assert.is_true(dle.core.memory_peak() >= allocated())
    t, views, d = nil, nil, nil
  end)

  it("tensors are freed by __gc: memory returns to its baseline after collectgarbage", function()
    local base = allocated()
    do
      local ts = {}
      for i = 1, 20 do ts[i] = dle.ones(N1MB) + i end
      assert.is_true(allocated() >= base + 20 * MB)
    end
    full_gc()
    assert.are.equal(base, allocated())
  end)

  it("temporaries of expressions are freed too", function()
    local base = allocated()
    local x = dle.ones(1000)
    for _ = 1, 10 do x = ((x * 2 + 1):exp():sqrt() - x):t():contiguous() end
    x = nil
    full_gc()
    assert.are.equal(base, allocated())
  end)

  it("`local t <close>` frees the storage at scope exit, without the collector", function()
    local base = allocated()
    collectgarbage("stop")
    do
      local t <close> = dle.zeros(N1MB)
      assert.are.equal(base + MB, allocated())
    end
    local after = allocated()
    collectgarbage("restart")
    assert.are.equal(base, after)
  end)

  it("a view keeps its storage alive after the base tensor is gone", function()
    local base = allocated()
    local v
    do
      local t = dle.arange(0, N1MB)
      v = t:narrow(1, 11, 5)
    end
    full_gc()
    assert.are.equal(base + MB, allocated())
    assert.are.same({10, 11, 12, 13, 14}, v:totable())
    v = nil
    full_gc()
    assert.are.equal(base, allocated())
  end)

  it("closing a view does not free storage other tensors still use", function()
    local t = dle.arange(0, 10)
    do
      local v <close> = t:narrow(1, 1, 3)
      assert.are.equal(2, v[3])
    end
    assert.are.equal(9, t[10])
  end)

  it("2000 x 1 MB allocations without collectgarbage keep memory bounded", function()
    local base = allocated()
    local peak = garbage_peak(2000)
    full_gc()
    -- the pacing collects whenever native memory grew by max(64 MB, live / 4) since the last time
    assert.is_true(peak < 100 * MB, string.format("peak %.1f MB above baseline", peak / MB))
    assert.are.equal(base, allocated())
  end)

  it("after a phase of big tensors, the next phase's garbage is collected by its own allowance", function()
    -- the collection threshold follows live memory down: a 256 MB phase must not let the next
    -- phase's 1 MB temporaries pile up to 320 MB (each pile-up faults in fresh memory)
    local big = {dle.empty(64 * N1MB), dle.empty(64 * N1MB), dle.empty(64 * N1MB), dle.empty(64 * N1MB)}
    big = nil
    full_gc()
    local peak = garbage_peak(300)
    assert.is_true(peak <= 70 * MB, string.format("peak %.1f MB above baseline", peak / MB))
  end)

  it("with a large data set resident, garbage is collected after a quarter of it, not all of it", function()
    local data = dle.empty(400 * N1MB)   -- 400 MB live (never touched): garbage may reach 100 MB, not 400 MB
    full_gc()
    local peak = garbage_peak(300)
    assert.is_true(peak <= 102 * MB, string.format("garbage peaked at %.1f MB", peak / MB))
    assert.is_true(data:numel() > 0)
  end)

  it("memory_stats reports live, peak and cached bytes; empty_cache returns the cache", function()
    local s0 = dle.memory_stats()
    assert.are.equal(allocated(), s0.allocated)
    assert.is_true(s0.peak >= s0.allocated and s0.cached >= 0)
    do
      local t <close> = dle.empty(N1MB)
      assert.are.equal(s0.allocated + MB, dle.memory_stats().allocated)
    end
    local s1 = dle.memory_stats()
    assert.are.equal(s0.allocated, s1.allocated)
    assert.is_true(s1.cached >= MB, "a freed 1 MB block is kept for reuse")
    dle.empty_cache()
    assert.are.equal(0, dle.memory_stats().cached)
    assert.has_error(function() dle.set_cache_limit(-1) end)
  end)

  it("reset_peak_memory_stats starts the peak from the bytes live now", function()
    local keep = dle.empty(N1MB)
    do local t <close> = dle.empty(2 * N1MB) end
    dle.reset_peak_memory_stats()
    local s = dle.memory_stats()
    assert.are.equal(s.allocated, s.peak)
    do local t <close> = dle.empty(N1MB) end
    assert.are.equal(s.allocated + MB, dle.memory_stats().peak)
    assert.is_true(keep:numel() > 0)
  end)

  it("backward through matmul reads its saved operands in place: it allocates the gradients, no copies", function()
    local n = 256                       -- every {n, n} float32 tensor is 256 KB
    local block = n * n * 4
    local x = dle.randn(n, n):requires_grad_()
    local w = dle.randn(n, n):requires_grad_()
    local c = dle.randn(n, n)
    local loss = (x:matmul(w) * c):sum()
    full_gc()
    dle.reset_peak_memory_stats()
    local base = allocated()
    loss:backward()
    -- the product's gradient (freed once used) takes the place of the saved product (freed after
    -- its node runs), then dx = g w^T and dw = x^T g: two blocks at the peak. A contiguous copy of
    -- x, w or either transpose would make it three.
    local grew = dle.memory_stats().peak - base
    assert.is_true(grew >= 2 * block and grew < 2 * block + 64 * 1024,
                   string.format("backward's peak grew by %.2f blocks of 256 KB", grew / block))
    assert.are.equal(base + block, allocated())   -- + 2 gradients - the saved product
  end)

  it("in-place ops do not allocate", function()
    local t = dle.zeros(N1MB)
    local base = allocated()
    t:add_(1)
    t:mul_(2)
    t:exp_()
    t:clamp_(0, 10)
    t:fill_(3)
    assert.are.equal(base, allocated())
  end)

  -- found by the API fuzzer (LeakSanitizer): the recorded node kept `a` itself, a's history was
  -- that node: a reference cycle that nothing freed
  it("an in-place op with an operand requiring grad frees its tensors (no reference cycle)", function()
    full_gc()
    local before = allocated()
    do
      local a = dle.ones(256, 256)
      local b = dle.ones(256):requires_grad_(true)
      a:mul_(b)
      assert.is_true(a.requires_grad)
    end
    full_gc()
    assert.are.equal(before, allocated())
  end)

  -- found by the API fuzzer (LeakSanitizer): set_tangent(x, x) made x hold itself
  it("a tensor cannot be its own tangent (a reference cycle)", function()
    local x = dle.ones(2)
    assert.has_error(function() dle.core._set_tangent(x, x) end)
    local y = dle.ones(2)
    dle.core._set_tangent(x, y)
    local ok, msg = pcall(dle.core._set_tangent, y, x)
    assert.is_false(ok)
    assert.is_truthy(msg:find("own tangent", 1, true))
  end)

  -- found by the API fuzzer (LeakSanitizer, seed 11): dle.backward(x, x) on a leaf stored x as its
  -- own .grad; links through .grad and .tangent could close the same kind of cycle
  it("a leaf given itself as its gradient is freed; cycles through .grad and .tangent are refused", function()
    local before = allocated()
    do
      local x = dle.ones(1000):requires_grad_()
      dle.backward(x, x)
      assert.is_false(rawequal(x.grad, x))
      assert.is_true(x.grad:equal(dle.ones(1000)))
      local y = dle.ones(3):requires_grad_()
      y:backward(y * 1)   -- not a cycle: stored as it is
      assert.is_true(y.grad:equal(dle.ones(3)))
      local a, b = dle.ones(2), dle.ones(2)
      a.grad = b
      local ok, msg = pcall(function() b.grad = a end)
      assert.is_false(ok)
      assert.is_truthy(msg:find("grad: a tensor cannot be its own gradient", 1, true), msg)
      ok = pcall(function() a.grad = a end)
      assert.is_false(ok)
      ok, msg = pcall(dle.core._set_tangent, b, a)   -- a.grad is b
      assert.is_false(ok)
      assert.is_truthy(msg:find("own tangent", 1, true), msg)
    end
    full_gc()
    assert.are.equal(before, allocated())
  end)

  -- found by the API fuzzer (LeakSanitizer, seed 11, iteration 118143): set_tangent(x, v) with v a
  -- view of x recorded while x required grad: v's history kept x, x kept v as its tangent
  it("a .grad or tangent holding its tensor through its history is stored detached, and freed", function()
    full_gc()
    local before = allocated()
    do
      local p = dle.full({1000}, 2):requires_grad_()
      p.grad = dle.ones(1000)
      p.grad = p.grad + p * 0.5           -- manual weight decay, with grad mode on
      assert.is_true(p.grad:equal(dle.full({1000}, 2)))
      assert.is_nil(p.grad.grad_fn)       -- its history (which holds p) was dropped
      local x = dle.ones(4, 4):requires_grad_()
      dle.core._set_tangent(x, x:t():select(1, 1):expand(4, 4))
      assert.is_true(dle.core._tangent(x):equal(dle.ones(4, 4)))
      assert.is_nil(dle.core._tangent(x).grad_fn)
      local y = dle.ones(3):requires_grad_()
      local g = y * 2                     -- no cycle: y is not g's tensor
      local z = dle.ones(3):requires_grad_()
      z.grad = g
      assert.is_not_nil(z.grad.grad_fn)   -- kept as it is, history and all
    end
    full_gc()
    assert.are.equal(before, allocated())
  end)

  -- bindings/lua_core.c (keep_gc_generational): under lua5.4's generational collector, dle runs a
  -- minor collection every few hundred new tensors, so dead small tensors are freed while their
  -- memory is still in cache, however big the Lua heap (Lua's own minor collections wait for the
  -- heap to grow by a fifth). The mode test comes last: seeing the incremental collector makes dle
  -- check far less often.
  describe("with Lua's generational collector", function()
    local mode
    before_each(function() mode = collectgarbage("generational") end)
    after_each(function() collectgarbage(mode) end)

    it("dead small tensors are freed every few hundred new ones, even beside a 10 MB Lua heap", function()
      local heap = {}
      for i = 1, 150000 do heap[i] = {i} end   -- Lua alone would let ~30000 tensors die first
      local base, peak = allocated(), 0
      for _ = 1, 20000 do
        local t = dle.empty(256)   -- 1 KB of storage each
        peak = math.max(peak, allocated() - base)
        t = nil
      end
      assert.is_true(peak < 4 * MB, string.format("dead tensors held %.1f MB", peak / MB))
      assert.are.equal(150000, #heap)
    end)

    -- ... and every few MB of native growth, so that a loop's mid-size results are reused while
    -- in cache instead of cycling through the 64 MB that a full collection waits for
    it("dead mid-size tensors are freed every few MB, not only by the 64 MB full collection", function()
      local base, peak = allocated(), 0
      for _ = 1, 400 do   -- 100 MB in all
        local t = dle.empty(64 * 1024)   -- 256 KB
        peak = math.max(peak, allocated() - base)
        t = nil
      end
      assert.is_true(peak < 12 * MB, string.format("dead tensors held %.1f MB", peak / MB))
    end)

    -- dle's steps must leave Lua's major collections to happen: Lua garbage that lives across a
    -- few of them grows old, and only a major collection frees old objects
    it("Lua garbage that grew old is still collected while tensors are made", function()
      collectgarbage()
      local base = collectgarbage("count")
      local a, keep, peak = dle.ones(1), {}, 0
      for i = 1, 200000 do
        local t = a + a
        keep[i % 2000] = {("x"):rep(100) .. i}   -- lives 2000 iterations: 12 collections
        t = nil
        if i % 10000 == 0 then peak = math.max(peak, collectgarbage("count") - base) end
      end
      -- 200000 tables of ~200 bytes: 40 MB if none were freed; 2000 of them live at a time
      assert.is_true(peak < 16 * 1024, string.format("Lua heap grew by %.1f MB", peak / 1024))
    end)

    -- a forward pass holds its activations: live memory that grows because it is kept is not
    -- old garbage, and must not start a full collection (a walk of the whole Lua heap) every few
    -- MB; the char-GPT training step ran about 25 per step
    it("tensors kept as they are made (a forward pass's activations) start few full collections", function()
      collectgarbage()
      local before = dle.core._gc_full_collections()
      local kept = {}
      for i = 1, 128 do kept[i] = dle.empty(512 * 1024) end   -- 2 MB each, 256 MB kept
      local ran = dle.core._gc_full_collections() - before
      kept = nil   -- luacheck: ignore 311
      collectgarbage()
      -- each full collection now waits for as much growth as was live after the previous one
      -- (a doubling), besides the quarter-of-live allowance of pace_gc: a handful in all
      assert.is_true(ran <= 12, ran .. " full collections while 256 MB were kept")
    end)

    it("a stopped collector stays stopped", function()
      collectgarbage("stop")
      local base = allocated()
      for _ = 1, 2000 do dle.empty(256) end
      for _ = 1, 40 do dle.empty(64 * 1024) end   -- 10 MB: past the byte step too
      local grown = allocated() - base
      collectgarbage("restart")
      assert.are.equal(2000 * 1024 + 40 * 256 * 1024, grown)
    end)

    it("a program's choice of the incremental collector is kept", function()
      collectgarbage("incremental")
      for _ = 1, 40 do dle.empty(64 * 1024) end   -- 10 MB: byte steps
      assert.are.equal("incremental", collectgarbage("incremental"))
      for _ = 1, 2000 do dle.ones(1) end                             -- count checks
      assert.are.equal("incremental", collectgarbage("incremental"))
    end)
  end)
end)

-- engine/alloc.c: DLE_MAX_MEMORY and dle.set_memory_limit cap the bytes live tensors hold
describe("the memory limit", function()
  local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

  -- Runs code in a child `scripts/dle -e` with DLE_MAX_MEMORY set to value; returns its output.
  local function child(value, code)
    local p = assert(io.popen(string.format("DLE_MAX_MEMORY=%q %q -e %q 2>&1", value, root .. "/scripts/dle", code)))
    local out = p:read("a")
    p:close()
    return out
  end

  before_each(full_gc)
  after_each(function() dle.set_memory_limit(nil) end)

  it("DLE_MAX_MEMORY sets it at load, with K/M/G suffixes; over it is an error naming the op, shape and limit",
     function()
    local out = child("2M", [[
      local dle = require("dle")
      io.write(dle.get_memory_limit(), "\n")
      local ok, msg = pcall(dle.randn, 1000, 1000)
      io.write(msg, "\n")
      io.write(dle.randn(100, 100):numel(), "\n")]])
    local limit, msg, after = out:match("^(%d+)\n(.-)\n(%d+)\n$")
    assert.are.equal("2000000", limit, out)
    assert.are.equal("randn: allocating {1000,1000} float32 (4.0 MB) would exceed the memory limit of 2.0 MB "
                     .. "(in use 0 bytes)", msg)
    assert.are.equal("10000", after)   -- the process carries on
    assert.are.equal("1073741824\n", child("1GiB", [[io.write(require("dle").get_memory_limit(), "\n")]]))
  end)

  it("a bad DLE_MAX_MEMORY is an error at require time naming the variable", function()
    for _, bad in ipairs{"lots", "2X", "-1G", "1G5"} do
      local out = child(bad, [[require("dle"); io.write("loaded")]])
      assert.is_truthy(out:find("DLE_MAX_MEMORY: '" .. bad .. "' is not a number of bytes", 1, true), out)
      assert.is_falsy(out:find("loaded", 1, true))
    end
  end)

  it("set_memory_limit caps live bytes; nil or 0 removes it; get_memory_limit reports it", function()
    assert.is_nil(dle.get_memory_limit())
    local base = allocated()
    dle.set_memory_limit(base + 2 * MB)
    assert.are.equal(base + 2 * MB, dle.get_memory_limit())
    assert.are.equal(base + 2 * MB, dle.memory_stats().limit)
    local a = dle.zeros(N1MB)
    local ok, msg = pcall(dle.ones, 2 * N1MB)
    assert.is_false(ok)
    assert.is_truthy(msg:find("^ones: allocating {524288} float32 %(2%.1 MB%) would exceed the memory limit of "), msg)
    local b = dle.ones(N1MB // 2)          -- a smaller allocation still fits
    assert.are.equal(base + MB + MB // 2, allocated())
    a, b = nil, nil
    full_gc()
    assert.are.equal(base, allocated())    -- nothing leaked by the failure
    dle.set_memory_limit(0)
    assert.is_nil(dle.get_memory_limit())
    dle.set_memory_limit("3M")
    assert.are.equal(3000000, dle.get_memory_limit())
    dle.set_memory_limit()
    assert.is_nil(dle.get_memory_limit())
    H.assert_error(function() dle.set_memory_limit(-1) end, "set_memory_limit:", "non-negative")
    H.assert_error(function() dle.set_memory_limit("lots") end, "set_memory_limit:", "'lots'")
    H.assert_error(function() dle.set_memory_limit({}) end, "set_memory_limit:", "argument #1")
  end)

  it("the allocator's cache is returned to the system when the limit refuses an allocation", function()
    do local t <close> = dle.empty(4 * N1MB) end
    assert.is_true(dle.memory_stats().cached >= 4 * MB)
    dle.set_memory_limit(allocated() + MB)
    assert.is_false(pcall(dle.empty, 2 * N1MB))
    assert.are.equal(0, dle.memory_stats().cached)
  end)

  it("backward hitting the limit mid-graph is an error; the process and the graph's memory recover", function()
    local base = allocated()
    local w = dle.randn(256, 256):requires_grad_()
    local x = dle.randn(64, 256)
    local h = x:matmul(w):relu():matmul(w):tanh():sum()
    dle.set_memory_limit(allocated() + 64 * 1024)   -- room for a little, not for the gradients
    local ok, msg = pcall(function() h:backward() end)
    assert.is_false(ok)
    assert.is_truthy(msg:find("would exceed the memory limit", 1, true), msg)
    assert.is_truthy(msg:find("^backward: ") or msg:find(": backward: "), msg)
    dle.set_memory_limit(nil)
    -- usable again: a fresh graph runs backward and gives the gradient
    w.grad = nil
    local h2 = x:matmul(w):sum()
    h2:backward()
    assert.are.same({256, 256}, w.grad:shape())
    w, x, h, h2 = nil, nil, nil, nil
    full_gc()
    assert.are.equal(base, allocated())
  end)

  it("the limit counts CPU memory only: CUDA tensors are not refused by it", function()
    if not dle.cuda_available() then
      pending("no CUDA device here")
      return
    end
    dle.set_memory_limit(allocated() + MB)
    local t = dle.zeros(4 * N1MB, {device = "cuda"})
    assert.are.equal(4 * N1MB, t:numel())
  end)
end)
