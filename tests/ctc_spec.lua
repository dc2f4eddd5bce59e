-- ctc_spec.lua — dle.nn.functional.ctc_loss and nn.CTCLoss: a brute-force check of the loss (sum
-- over every alignment of T = 3 frames), padded and concatenated targets agreeing, unbatched
-- input, the reductions (mean divides by the target lengths), float32 near float64, bad input
-- errors naming ctc_loss, and, with torch, values and gradients against PyTorch in float64
-- (blank 1 here is PyTorch's blank 0: classes are 1-based in dle).
local dle = require("dle")
local H = require("helpers")

local F, nn = dle.nn.functional, dle.nn
local I64 = {dtype = "int64"}

-- -log sum over the paths of T frames that collapse (merge repeats, drop blank) to target
local function brute(lp, target, blank)
  local T, C = #lp, #lp[1]
  local total = 0
  local function walk(t, path, logp)
    if t > T then
      local out, prev = {}, nil
      for _, c in ipairs(path) do
        if c ~= prev and c ~= blank then out[#out + 1] = c end
        prev = c
      end
      if table.concat(out, ",") == table.concat(target, ",") then total = total + math.exp(logp) end
      return
    end
    for c = 1, C do
      path[t] = c
      walk(t + 1, path, logp + lp[t][c])
    end
    path[t] = nil
  end
  walk(1, {}, 0)
  return -math.log(total)
end

describe("ctc_loss", function()
  local lp = H.seeded({3, 2, 3}, 1, -2, 2):log_softmax(3)

  it("equals the brute-force sum over all alignments (repeats, blank 1 and blank 3)", function()
    local cases = {{{2}, 1}, {{2, 3}, 1}, {{2, 2}, 1}, {{1, 2}, 3}}
    for _, c in ipairs(cases) do
      local target, blank = c[1], c[2]
      local t = dle.tensor({target, target}, I64)
      local l = F.ctc_loss(lp, t, {3, 3}, {#target, #target}, {reduction = "none", blank = blank})
      for n = 1, 2 do
        local want = brute(lp:select(2, n):totable(), target, blank)
        assert.is_true(math.abs(l[n] - want) < 1e-12, table.concat(target, ",") .. " sample " .. n)
      end
    end
  end)

  it("padded and concatenated targets, and the unbatched form, give the same losses", function()
    local a = F.ctc_loss(lp, dle.tensor({{2, 3}, {3, 0}}, I64), {3, 2}, {2, 1}, {reduction = "none"})
    local b = F.ctc_loss(lp, dle.tensor({2, 3, 3}, I64), dle.tensor({3, 2}, I64), dle.tensor({2, 1}, I64),
                         {reduction = "none"})
    assert.is_true(H.max_diff(a, b) == 0)
    local u = F.ctc_loss(lp:select(2, 2), dle.tensor({3}, I64), 2, 1, {reduction = "none"})
    assert.are.same({}, u:shape())
    assert.is_true(math.abs(u:item() - a[2]) < 1e-14)
  end)

  it("reductions: mean divides by target lengths then averages; sum adds; CTCLoss is the function", function()
    local t, il, tl = dle.tensor({{2, 3}, {3, 0}}, I64), {3, 2}, {2, 1}
    local none = F.ctc_loss(lp, t, il, tl, {reduction = "none"})
    local want = (none[1] / 2 + none[2] / 1) / 2
    assert.is_true(math.abs(F.ctc_loss(lp, t, il, tl):item() - want) < 1e-14)
    assert.is_true(math.abs(F.ctc_loss(lp, t, il, tl, {reduction = "sum"}):item() - none:sum():item()) < 1e-14)
    assert.are.equal(F.ctc_loss(lp, t, il, tl):item(), nn.CTCLoss()(lp, t, il, tl):item())
  end)

  it("float32 and bfloat16 follow float64", function()
    local t = dle.tensor({{2, 3}, {3, 0}}, I64)
    local ref = F.ctc_loss(lp, t, {3, 2}, {2, 1}, {reduction = "none"})
    assert.is_true(H.max_diff(F.ctc_loss(lp:float(), t, {3, 2}, {2, 1}, {reduction = "none"}), ref) < 1e-5)
    assert.is_true(H.max_diff(F.ctc_loss(lp:bfloat16(), t, {3, 2}, {2, 1}, {reduction = "none"}), ref) < 0.1)
  end)

  it("bad input is an error naming ctc_loss and the shapes or values", function()
    local function fails(pattern, ...)
      local ok, err = pcall(F.ctc_loss, ...)
      assert.is_false(ok)
      assert.matches(pattern, err)
    end
    local t = dle.tensor({{2, 3}, {3, 0}}, I64)
    fails("ctc_loss: target 2 of sample 1 is 1, not a class", lp, dle.tensor({{2, 1}, {3, 0}}, I64), {3, 2}, {2, 1})
    fails("ctc_loss: target 1 of sample 1 is 4, not a class", lp, dle.tensor({{4, 1}, {3, 0}}, I64), {3, 2}, {2, 1})
    fails("ctc_loss: input_lengths%[2%] = 4 is outside", lp, t, {3, 4}, {2, 1})
    fails("ctc_loss: target_lengths%[1%] = 3 is outside", lp, t, {3, 2}, {3, 1})
    fails("ctc_loss: input_lengths must have shape {2}", lp, t, {3}, {2, 1})
    fails("ctc_loss: targets must be an integer tensor", lp, t:double(), {3, 2}, {2, 1})
    fails("ctc_loss: log_probs must be a 3%-D float tensor", lp:long(), t, {3, 2}, {2, 1})
    fails("ctc_loss: blank 7 is not a class", lp, t, {3, 2}, {2, 1}, {blank = 7})
    fails("ctc_loss: unknown option", lp, t, {3, 2}, {2, 1}, {blnk = 1})
  end)

  it("values and gradients equal PyTorch's in float64", function()
    if H.without_torch(pending) then return end
    local x = H.seeded({7, 3, 5}, 5, -2, 2)
    local t = dle.tensor({{2, 3, 3, 4}, {5, 2, 1, 1}, {4, 4, 4, 2}}, I64)
    for _, r in ipairs({"none", "mean", "sum"}) do
      local xs = x:clone():requires_grad_()
      local l = F.ctc_loss(xs:log_softmax(3), t, {7, 6, 7}, {4, 2, 3}, {reduction = r})
      l:sum():backward()
      local out = H.run_torch({x = x, t = t:double()}, {
        "xs = x.clone().requires_grad_()",
        "l = torch.nn.functional.ctc_loss(xs.log_softmax(2), t.long() - 1, [7, 6, 7], [4, 2, 3],"
          .. " reduction='" .. r .. "')",
        "p(l)", "l.sum().backward()", "p(xs.grad)"})
      H.assert_torch_numbers(H.flat(l:totable()), out[1], 1e-10, "loss " .. r)
      H.assert_torch_numbers(H.flat(xs.grad:totable()), out[2], 1e-10, "grad " .. r)
    end
  end)
end)
