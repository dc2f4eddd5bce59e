-- profile_spec.lua — dle.profile and dle.flops: the FLOP counts of products (matmul, bmm, the
-- added term of linear, conv2d against Conv2d's own count from summary, sdpa), backward FLOPs,
-- call counts, bytes moved, views and optimizer steps, nesting, the profiler switched off after
-- an error, the printed table, bad input, and the ops that count no FLOPs. No timings are
-- asserted (only that time is reported, non-negative).
local dle = require("dle")

--- The entry of op `name` in a profile (nil when not called).
local function entry(prof, name)
  for _, r in ipairs(prof:ops()) do
    if r.op == name then return r end
  end
end

describe("dle.flops", function()
  it("counts 2*m*n*k for a matmul of odd sizes, and per batch for bmm", function()
    local m, k, n = 5, 7, 3
    local a, b = dle.randn(m, k), dle.randn(k, n)
    assert.are.equal(2 * m * n * k, (dle.flops(function() return a:matmul(b) end)))
    local ba, bb = dle.randn(4, m, k), dle.randn(4, k, n)
    assert.are.equal(4 * 2 * m * n * k, (dle.flops(dle.bmm, ba, bb)))
    -- a broadcast batch: {m, k} against {4, k, n} is 4 products
    assert.are.equal(4 * 2 * m * n * k, (dle.flops(dle.matmul, a, bb)))
  end)

  it("returns fn's results after the FLOPs", function()
    local a = dle.ones(3)
    local f, x, extra = dle.flops(function(t, s) return t * 2, s end, a, "kept")
    assert.are.equal(3 * 2 - 3, f) -- the scalar 2 becomes a 0-FLOP full, the mul 3
    assert.are.same({2, 2, 2}, x:tolist())
    assert.are.equal("kept", extra)
  end)

  it("counts 1 per output element for elementwise ops and 1 per input element for reductions", function()
    local x, y = dle.randn(4, 6), dle.randn(6) -- y broadcasts over the rows
    assert.are.equal(24, (dle.flops(function() return x + y end)))
    assert.are.equal(24, (dle.flops(function() return x:exp() end)))
    assert.are.equal(24, (dle.flops(function() return x:sum(2) end)))
    assert.are.equal(24, (dle.flops(function() return x:sum() end)))
    local rule, per = dle.core._op_flops_rule("softmax")
    assert.are.equal("per input element", rule)
    assert.are.equal(per * 24, (dle.flops(function() return x:softmax(2) end)))
  end)

  it("equals the total FLOPs of dle.profile for the same work", function()
    local net = dle.nn.Sequential(dle.nn.Linear(6, 5), dle.nn.ReLU(), dle.nn.Linear(5, 2))
    local x = dle.randn(9, 6)
    local function step()
      net:zero_grad()
      local loss = net(x):pow(2):mean()
      loss:backward()
      return loss
    end
    local f = dle.flops(step)
    assert.is_true(f > 0)
    assert.are.equal(f, dle.profile(step).total.flops)
  end)
end)

describe("dle.profile", function()
  it("counts a Linear forward as 2*B*in*out plus the bias, and its backward as two products", function()
    local B, I, O = 5, 7, 3
    local lin = dle.nn.Linear(I, O)
    local x = dle.randn(B, I, {requires_grad = true})
    local fwd = dle.profile(function() return lin(x) end)
    assert.are.equal(lin:flops({x}) + B * O, entry(fwd, "matmul").flops)
    assert.are.equal(2 * B * I * O + B * O, entry(fwd, "matmul").flops)
    local prof = dle.profile(function() lin(x):sum():backward() end)
    local mm = entry(prof, "matmul")
    assert.are.equal(3, mm.calls) -- forward, gradient of x, gradient of the weight
    assert.are.equal(2 * B * I * O + B * O + 2 * (2 * B * I * O), mm.flops)
  end)

  it("counts a conv2d forward as nn.Conv2d's own count from summary, plus the bias", function()
    local N, C, Hh, W = 2, 3, 9, 7
    local x = dle.randn(N, C, Hh, W)
    local plain = dle.nn.Conv2d(C, 4, 3, {padding = 1, bias = false})
    local from_summary = plain:summary({N, C, Hh, W}, {print = false}).total_flops
    assert.are.equal(from_summary, (dle.flops(plain, x)))
    local strided = dle.nn.Conv2d(C, 6, {3, 2}, {stride = 2, groups = 3})
    local y = strided(x)
    assert.are.equal(strided:summary({N, C, Hh, W}, {print = false}).total_flops + y:numel(),
                     (dle.flops(strided, x)))
  end)

  it("counts both conv2d gradient ops as the forward product", function()
    local conv = dle.nn.Conv2d(4, 6, 3, {groups = 2, bias = false})
    local x = dle.randn(2, 4, 8, 5, {requires_grad = true})
    local prof = dle.profile(function() conv(x):sum():backward() end)
    local fwd = entry(prof, "conv2d").flops
    assert.are.equal(conv:flops(x), fwd)
    assert.are.equal(fwd, entry(prof, "conv2d_grad_input").flops)
    assert.are.equal(fwd, entry(prof, "conv2d_grad_weight").flops)
  end)

  it("counts sdpa as 4*B*H*T*T*E, causal or not, and its backward as twice that", function()
    local B, Hh, T, E = 2, 3, 5, 4
    local q = dle.randn(B, Hh, T, E, {requires_grad = true})
    local k, v = dle.randn(B, Hh, T, E), dle.randn(B, Hh, T, E)
    local sdpa = dle.nn.functional.scaled_dot_product_attention
    for _, causal in ipairs({false, true}) do
      local prof = dle.profile(function() sdpa(q, k, v, {causal = causal}):sum():backward() end)
      assert.are.equal(4 * B * Hh * T * T * E, entry(prof, "sdpa").flops)
      assert.are.equal(8 * B * Hh * T * T * E, entry(prof, "sdpa_backward").flops)
    end
  end)

  it("counts calls: a + b three times is 3 calls of add", function()
    local a, b = dle.randn(4), dle.randn(4)
    local prof = dle.profile(function()
      for _ = 1, 3 do local _ = a + b end
    end)
    local add = entry(prof, "add")
    assert.are.equal(3, add.calls)
    assert.are.equal(12, add.flops)
    assert.are.equal(3, prof.total.calls)
  end)

  it("counts bytes as inputs read plus outputs written, a broadcast dim once", function()
    local x, y = dle.ones(1000), dle.ones(1000)
    assert.are.equal(12000, dle.profile(function() return x + y end).total.bytes)
    local s = dle.ones(1):expand(1000) -- one element read 1000 times
    assert.are.equal(4000 + 4 + 4000, entry(dle.profile(function() return x + s end), "add").bytes)
    local d = dle.ones(10, {dtype = "float64"})
    assert.are.equal(3 * 80, dle.profile(function() return d * d end).total.bytes)
  end)

  it("counts views as 0 FLOPs and 0 bytes, and copies as bytes only", function()
    local x = dle.randn(6, 4)
    local prof = dle.profile(function() return x:t():contiguous() end)
    local view = entry(prof, "permute")
    assert.are.same({1, 0, 0}, {view.calls, view.flops, view.bytes})
    local copy = entry(prof, "copy")
    assert.are.same({0, 2 * 24 * 4}, {copy.flops, copy.bytes})
  end)

  it("counts optimizer steps per parameter element", function()
    local w = dle.randn(3, 5, {requires_grad = true})
    local b = dle.randn(5, {requires_grad = true})
    w.grad, b.grad = dle.ones(3, 5), dle.ones(5)
    local prof = dle.profile(function() dle.optim.SGD({w, b}, {lr = 0.1}):step() end)
    local sgd = entry(prof, "sgd_step")
    assert.are.equal(2, sgd.calls)
    assert.are.equal(2 * 20, sgd.flops) -- p -= lr * g: 2 per element
    assert.are.equal(20 * 3 * 4, sgd.bytes) -- p read and written, g read, float32
    local adam = dle.optim.Adam({w, b}, {lr = 0.1})
    local step = entry(dle.profile(function() adam:step() end), "adam_step")
    assert.are.equal(2, step.calls)
    assert.are.equal(13 * 20, step.flops)
  end)

  it("returns fn's results and totals that add up over the ops", function()
    local x = dle.randn(8, 8)
    local prof = dle.profile(function(a, tag) return a:matmul(a):relu(), tag, nil end, x, "t")
    assert.are.equal(3, prof.results.n)
    assert.are.same({8, 8}, prof.results[1]:shape())
    assert.are.equal("t", prof.results[2])
    local sum = {calls = 0, seconds = 0, flops = 0, bytes = 0}
    for _, r in ipairs(prof:ops()) do
      assert.is_true(r.seconds >= 0)
      for key in pairs(sum) do sum[key] = sum[key] + r[key] end
    end
    assert.are.equal(sum.calls, prof.total.calls)
    assert.are.equal(sum.flops, prof.total.flops)
    assert.are.equal(sum.bytes, prof.total.bytes)
    assert.is_true(math.abs(sum.seconds - prof.total.seconds) <= 1e-9)
    assert.is_true(prof.total.wall >= 0)
    -- sorted by time, most first
    local ops = prof:ops()
    for i = 2, #ops do assert.is_true(ops[i - 1].seconds >= ops[i].seconds) end
  end)

  it("nests: the inner profile sees its own ops, the outer one all of them", function()
    local a = dle.randn(3)
    local inner
    local outer = dle.profile(function()
      local _ = a + a
      inner = dle.profile(function() return a * a end)
      assert.are.equal("timed", dle.core._profile_mode())
      local _ = dle.flops(function() return a - a end)
      assert.are.equal("timed", dle.core._profile_mode()) -- a nested dle.flops keeps the timing on
      return a + a
    end)
    assert.are.equal(1, inner.total.calls)
    assert.is_nil(entry(inner, "add"))
    assert.are.equal(2, entry(outer, "add").calls)
    assert.are.equal(1, entry(outer, "mul").calls)
    assert.are.equal(1, entry(outer, "sub").calls)
    assert.are.equal("off", dle.core._profile_mode())
  end)

  it("is switched off after an error in fn, and re-raises it", function()
    local a = dle.randn(3)
    local ok, err = pcall(dle.profile, function()
      local _ = a + a
      error("boom in fn")
    end)
    assert.is_false(ok)
    assert.matches("boom in fn", err)
    assert.are.equal("off", dle.core._profile_mode())
    -- also from a nested dle.flops inside a profile: the outer one is left running
    local outer = dle.profile(function()
      assert.is_false(pcall(dle.flops, function() local _ = a * a; error({code = 7}) end))
      assert.are.equal("timed", dle.core._profile_mode())
      return a + a
    end)
    assert.are.equal("off", dle.core._profile_mode())
    assert.are.equal(1, entry(outer, "mul").calls)
    -- an engine error inside fn (bad shapes) comes out unchanged too
    local ok2, err2 = pcall(dle.flops, function() return dle.randn(2, 3):matmul(dle.randn(2, 3)) end)
    assert.is_false(ok2)
    assert.matches("not aligned", err2)
    assert.are.equal("off", dle.core._profile_mode())
  end)

  it("prints a table of op, calls, time, FLOPs and bytes", function()
    local a, b = dle.randn(16, 16), dle.randn(16, 16)
    local prof = dle.profile(function() return (a:matmul(b) + a):sum() end)
    local text = tostring(prof)
    for _, col in ipairs({"op", "calls", "total ms", "% time", "GFLOP", "GFLOP/s", "MB", "GB/s"}) do
      assert.truthy(text:find(col, 1, true), "column " .. col)
    end
    for _, op in ipairs({"matmul", "add", "sum", "total (ops)"}) do
      assert.truthy(text:find(op, 1, true), "row " .. op)
    end
    local top = prof:table(1)
    assert.truthy(top:find("... 2 more ops", 1, true))
    assert.are.equal(1 + 1 + 3, select(2, top:gsub("\n", "\n")) + 1) -- header, 1 op, more, total, wall
  end)

  it("rejects what is not a function, naming dle.profile / dle.flops", function()
    assert.has_error(function() dle.profile(42) end, "dle.profile: expected a function to run, got number")
    assert.has_error(function() dle.flops("x") end, "dle.flops: expected a function to run, got string")
    assert.has_error(function() dle.profile() end, "dle.profile: expected a function to run, got nil")
    local prof = dle.profile(function() end)
    assert.are.equal(0, prof.total.calls)
    assert.has_error(function() prof:table(-1) end, "profile:table: n must be a non-negative integer, got -1")
    assert.has_error(function() dle.core._profile_mode("loud") end)
    assert.are.equal("off", dle.core._profile_mode())
    -- a callable table is a function
    local callable = setmetatable({}, {__call = function() return dle.ones(2) + 1 end})
    assert.are.equal(2, (dle.flops(callable)))
  end)

  it("gives every op a FLOP rule; the ops that count none are data movement", function()
    local none = {}
    for _, info in ipairs(dle.core.op_table()) do
      local rule, per = dle.core._op_flops_rule(info.name)
      assert.is_string(rule)
      if rule == "none" then none[#none + 1] = info.name
      elseif rule:find("per .* element") and rule:sub(1, 2) ~= "kh" then
        assert.is_true(per >= 1, info.name .. " counts " .. per .. " per element")
      end
    end
    table.sort(none)
    assert.are.same({"arange", "cat", "copy", "diagonal", "embedding", "expand", "flip", "full", "gather",
                     "index_select", "masked_fill", "masked_scatter", "masked_select", "narrow",
                     "nonzero", "one_hot", "pad", "permute", "rand", "randint", "randn", "roll", "scatter",
                     "select", "tril", "triu", "unique", "view"}, none)
    assert.has_error(function() dle.core._op_flops_rule("nope") end, "op_flops_rule: no op named 'nope'")
  end)
end)
