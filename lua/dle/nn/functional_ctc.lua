--- dle.nn.functional.ctc_loss (and nn.CTCLoss's function): the connectionist temporal
-- classification loss with PyTorch's semantics. The alpha-beta recursion in log space and its
-- gradient are the C op dle.ctc_loss (kernels/cpu/ctc.c; CPU only). This file returns
-- {ctc_loss = ...}; dle.nn.functional gathers it.
-- Classes are 1-based as everywhere in dle (API.md): target values are class numbers 1..C and
-- `blank` defaults to 1, the first class (PyTorch's blank = 0).
local dle = require("dle")
local check = require("dle.check")

local M = {}

-- lengths as an int64 tensor {N} (a tensor, a Lua list of integers or, unbatched, one integer)
local function lengths(v, what, batched)
  if math.type(v) == "integer" and not batched then return dle.tensor({v}, {dtype = "int64"}) end
  if type(v) == "table" and not dle.is_tensor(v) then
    for i, n in ipairs(v) do
      if math.type(n) ~= "integer" then
        check.error(string.format("ctc_loss: %s[%d] must be an integer, got %s", what, i, tostring(n)))
      end
    end
    return dle.tensor(v, {dtype = "int64"})
  end
  check.tensor(v, "ctc_loss", what)
  if not batched then
    if v:numel() ~= 1 then
      check.error(string.format("ctc_loss: %s must be one integer for unbatched log_probs {T, C}, got shape %s",
                                what, check.shape_str(v)))
    end
    return v:reshape(1)
  end
  return v
end

--- ctc_loss(log_probs, targets, input_lengths, target_lengths, opts): log_probs {T, N, C} (log
-- softmax outputs; unbatched {T, C}), targets {N, S} padded or 1-D concatenated (1-based class
-- numbers, never the blank), input_lengths and target_lengths {N} (tensors or lists of integers).
-- reduction "mean" (each loss divided by its target length, then the batch mean), "sum" or
-- "none" ({N}); zero_infinity = true gives 0 (and a zero gradient) for impossible alignments.
-- @param opts optional {blank = 1, reduction = "mean", zero_infinity = false}
-- @return loss tensor
function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
  opts = check.options(opts, "ctc_loss", {"blank", "reduction", "zero_infinity"})
  local r = check.reduction("ctc_loss", opts.reduction)
  local blank = opts.blank or 1
  if math.type(blank) ~= "integer" then check.error("ctc_loss: blank must be an integer class number") end
  local zi = opts.zero_infinity
  if zi ~= nil then check.boolean(zi, "ctc_loss", "zero_infinity") end
  check.tensor(log_probs, "ctc_loss", "log_probs")
  check.tensor(targets, "ctc_loss", "targets")
  local batched = log_probs:dim() ~= 2
  if not batched then
    log_probs, targets = log_probs:unsqueeze(2), targets:unsqueeze(1)
  end
  local il = lengths(input_lengths, "input_lengths", batched)
  local tl = lengths(target_lengths, "target_lengths", batched)
  local loss = dle.ctc_loss(log_probs, targets, il, tl, blank, zi == true)
  if zi then loss = loss:masked_fill(loss:isinf(), 0) end
  if not batched and r == "none" then return loss:squeeze(1) end
  if r == "none" then return loss end
  if r == "sum" then return loss:sum() end
  return (loss / tl:clamp(1, math.huge):to(loss:dtype())):mean()
end

return M
