-- covers: ctc_loss
-- grad_ctc_spec.lua — the gradient of ctc_loss: reverse and forward mode against finite differences
-- in float64 through log_softmax (PyTorch's CTC gradient is exp(lp) - posterior, the gradient of
-- the loss of log_softmax's input: it assumes normalized log_probs, as the loss itself does), padded
-- and concatenated targets, repeated labels, each reduction, zero_infinity; double backward is
-- refused with an error.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local I64 = {dtype = "int64"}
local padded = dle.tensor({{2, 3, 3}, {4, 2, 1}}, I64)
local concat = dle.tensor({2, 3, 3, 4, 2}, I64)

local function loss_of(targets, il, tl, opts)
  return function(x) return F.ctc_loss(x:log_softmax(3), targets, il, tl, opts) end
end

describe("ctc_loss gradients", function()
  it("gradcheck (reverse and forward) with padded and concatenated targets, each reduction", function()
    local x = H.seeded({6, 2, 4}, 1, -2, 2)
    for _, r in ipairs({"none", "sum", "mean"}) do
      H.gradcheck(loss_of(padded, {6, 5}, {3, 2}, {reduction = r}), {x})
      H.gradcheck(loss_of(concat, {6, 4}, {3, 2}, {reduction = r}), {x})
    end
  end)

  it("gradcheck with another blank and a transposed input", function()
    local x = H.seeded({2, 6, 5}, 2, -2, 2):transpose(1, 2)
    H.gradcheck(loss_of(dle.tensor({{1, 1, 4}, {5, 2, 1}}, I64), {6, 6}, {3, 1}, {blank = 3}), {x})
  end)

  it("zero_infinity: an impossible alignment has loss 0 and gradient 0, the others are unchanged", function()
    local x = H.seeded({3, 2, 4}, 3, -2, 2):requires_grad_()
    -- sample 2 needs 2 + 1 repeats = 4 frames but has 3
    local t = dle.tensor({{2, 3, 0}, {3, 3, 3}}, I64)
    local l = F.ctc_loss(x:log_softmax(3), t, {3, 3}, {2, 3}, {reduction = "none", zero_infinity = true})
    assert.are.equal(0, l[2])
    l:sum():backward()
    assert.are.equal(0, x.grad:select(2, 2):abs():max():item())
    assert.is_true(x.grad:select(2, 1):abs():max():item() > 0)
    local inf = F.ctc_loss(x:detach():log_softmax(3), t, {3, 3}, {2, 3}, {reduction = "none"})
    assert.are.equal(math.huge, inf[2])
  end)

  it("double backward is an error naming ctc_loss", function()
    local x = H.seeded({4, 1, 3}, 4):requires_grad_()
    local ok, err = pcall(function()
      return dle.grad({F.ctc_loss(x:log_softmax(3), dle.tensor({{2}}, I64), {4}, {1})}, {x}, {create_graph = true})
    end)
    assert.is_false(ok)
    assert.matches("ctc_loss: double backward", err)
  end)
end)
