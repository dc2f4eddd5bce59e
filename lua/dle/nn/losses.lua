--- Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss, L1Loss, SmoothL1Loss,
-- HuberLoss, KLDivLoss, BCELoss, PoissonNLLLoss, CosineEmbeddingLoss, MarginRankingLoss,
-- TripletMarginLoss, MultiLabelSoftMarginLoss, HingeEmbeddingLoss, SoftMarginLoss,
-- GaussianNLLLoss (options kept, forward calls dle.nn.functional with them). Called as
-- `loss_fn(input, target)` (three tensors for the ranking, embedding, triplet and Gaussian ones).
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local check = require("dle.check")

local L = {}

-- nargs: how many tensors forward takes (2 unless given).
local function loss_class(name, fn, keys, nargs)
  nargs = nargs or 2
  local cls = Module:extend(name)
  --- @param opts optional options table (see dle.nn.functional)
  cls.init = function(self, opts)
    local o = {}
    for k, v in pairs(check.options(opts, name, keys)) do o[k] = v end
    self.opts = o
  end
  --- @param ... the loss's tensors (input, target; or input1, input2, target; anchor, positive,
  --   negative; input, target, var)
  -- @return loss tensor
  cls.forward = function(self, ...)
    local args = table.pack(...)
    if args.n > nargs then
      check.error(string.format("%s: expected %d tensors, got %d arguments", name, nargs, args.n))
    end
    args[nargs + 1] = self.opts
    return fn(table.unpack(args, 1, nargs + 1))
  end
  cls.extra_repr = function(self) return "reduction=" .. (self.opts.reduction or "mean") end
  return cls
end

local CLASS_OPTS = {"ignore_index", "label_smoothing", "reduction", "weight"}
--- CrossEntropyLoss({ignore_index, label_smoothing, reduction = "mean"|"sum"|"none", weight}).
L.CrossEntropyLoss = loss_class("CrossEntropyLoss", F.cross_entropy, CLASS_OPTS)
--- NLLLoss({ignore_index, label_smoothing, reduction, weight}).
L.NLLLoss = loss_class("NLLLoss", F.nll_loss, CLASS_OPTS)
--- MSELoss({reduction}).
L.MSELoss = loss_class("MSELoss", F.mse_loss, {"reduction"})
--- BCEWithLogitsLoss({reduction, pos_weight}).
L.BCEWithLogitsLoss = loss_class("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits, {"reduction", "pos_weight"})

--- L1Loss({reduction}).
L.L1Loss = loss_class("L1Loss", F.l1_loss, {"reduction"})
--- SmoothL1Loss({reduction, beta = 1}).
L.SmoothL1Loss = loss_class("SmoothL1Loss", F.smooth_l1_loss, {"reduction", "beta"})
--- HuberLoss({reduction, delta = 1}).
L.HuberLoss = loss_class("HuberLoss", F.huber_loss, {"reduction", "delta"})
--- KLDivLoss({reduction = "mean"|"batchmean"|"sum"|"none", log_target = false}).
L.KLDivLoss = loss_class("KLDivLoss", F.kl_div, {"reduction", "log_target"})
--- BCELoss({reduction, weight}).
L.BCELoss = loss_class("BCELoss", F.binary_cross_entropy, {"reduction", "weight"})
--- PoissonNLLLoss({log_input = true, full = false, eps = 1e-8, reduction}).
L.PoissonNLLLoss = loss_class("PoissonNLLLoss", F.poisson_nll_loss, {"reduction", "log_input", "full", "eps"})
--- CosineEmbeddingLoss({margin = 0, reduction}); called as loss_fn(x1, x2, y).
L.CosineEmbeddingLoss = loss_class("CosineEmbeddingLoss", F.cosine_embedding_loss, {"reduction", "margin"}, 3)
--- MarginRankingLoss({margin = 0, reduction}); called as loss_fn(x1, x2, y).
L.MarginRankingLoss = loss_class("MarginRankingLoss", F.margin_ranking_loss, {"reduction", "margin"}, 3)
--- TripletMarginLoss({margin = 1, p = 2, eps = 1e-6, swap = false, reduction}); called as
-- loss_fn(anchor, positive, negative).
L.TripletMarginLoss = loss_class("TripletMarginLoss", F.triplet_margin_loss,
  {"reduction", "margin", "p", "eps", "swap"}, 3)
--- MultiLabelSoftMarginLoss({weight, reduction}).
L.MultiLabelSoftMarginLoss = loss_class("MultiLabelSoftMarginLoss", F.multilabel_soft_margin_loss,
  {"reduction", "weight"})
--- HingeEmbeddingLoss({margin = 1, reduction}).
L.HingeEmbeddingLoss = loss_class("HingeEmbeddingLoss", F.hinge_embedding_loss, {"reduction", "margin"})
--- SoftMarginLoss({reduction}).
L.SoftMarginLoss = loss_class("SoftMarginLoss", F.soft_margin_loss, {"reduction"})
--- GaussianNLLLoss({full = false, eps = 1e-6, reduction}); called as loss_fn(input, target, var).
L.GaussianNLLLoss = loss_class("GaussianNLLLoss", F.gaussian_nll_loss, {"reduction", "full", "eps"}, 3)
--- CTCLoss({blank = 1, reduction, zero_infinity = false}); called as
-- loss_fn(log_probs, targets, input_lengths, target_lengths).
L.CTCLoss = loss_class("CTCLoss", F.ctc_loss, {"reduction", "blank", "zero_infinity"}, 4)
--- MultiMarginLoss({p = 1, margin = 1, weight, reduction}).
L.MultiMarginLoss = loss_class("MultiMarginLoss", F.multi_margin_loss, {"reduction", "p", "margin", "weight"})
--- MultiLabelMarginLoss({reduction}); targets end at the first class < 1.
L.MultiLabelMarginLoss = loss_class("MultiLabelMarginLoss", F.multilabel_margin_loss, {"reduction"})

return L
