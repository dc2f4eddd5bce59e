-- options_spec.lua — "an option a function does not know is an error naming it" (API.md), across
-- the public API: every function and constructor that takes an options table, called with valid
-- positional arguments and {bogus_option = 1}, raises an error naming the function and
-- bogus_option (and the options it knows). The Lua packages are walked: each public function
-- and class of dle.nn, dle.nn.functional, dle.nn.init, dle.nn.utils, dle.optim, dle.optim.lr,
-- dle.amp, dle.dist, dle.rewrite, dle.models and dle.tokenizer must be listed below as taking options (with a call) or
-- not, so a new one cannot be forgotten. dle's own functions (C) are listed by hand.
local dle = require("dle")

local nn, F = dle.nn, dle.nn.functional
local I64 = {dtype = "int64"}
local BOGUS = {bogus_option = 1}

local x = dle.randn(2, 3)
local p01 = dle.rand(2, 3)
local t = dle.tensor({1, 3}, I64)
local img = dle.randn(1, 2, 4, 4)
local function params() return {dle.zeros(2):requires_grad_()} end
local function opt() return dle.optim.SGD(params(), {lr = 0.1}) end

-- name -> {function(opts) calling it with opts, the name its message uses}
local with_options = {
  -- dle.nn classes (constructors) and methods
  ["nn.Linear"] = {function(o) return nn.Linear(3, 2, o) end, "Linear"},
  ["nn.Conv2d"] = {function(o) return nn.Conv2d(2, 2, 3, o) end, "Conv2d"},
  ["nn.MaxPool2d"] = {function(o) return nn.MaxPool2d(2, 2, o) end, "MaxPool2d"},
  ["nn.AvgPool2d"] = {function(o) return nn.AvgPool2d(2, 2, o) end, "AvgPool2d"},
  ["nn.BatchNorm1d"] = {function(o) return nn.BatchNorm1d(3, o) end, "BatchNorm1d"},
  ["nn.BatchNorm2d"] = {function(o) return nn.BatchNorm2d(3, o) end, "BatchNorm2d"},
  ["nn.Dropout"] = {function(o) return nn.Dropout(0.5, o) end, "Dropout"},
  ["nn.Embedding"] = {function(o) return nn.Embedding(4, 2, o) end, "Embedding"},
  ["nn.LayerNorm"] = {function(o) return nn.LayerNorm(3, o) end, "LayerNorm"},
  ["nn.RMSNorm"] = {function(o) return nn.RMSNorm(3, o) end, "RMSNorm"},
  ["models.gpt2.GPT2"] = {function(o) return dle.models.gpt2.GPT2({n_layer = 1, n_embd = 4, n_head = 1}, o) end,
    "GPT2"},
  ["models.llama.Llama"] = {function(o) return dle.models.llama.Llama({num_hidden_layers = 1, hidden_size = 4,
    num_attention_heads = 1}, o) end, "Llama"},
  ["models.gpt2.from_pretrained"] = {function(o) return dle.models.gpt2.from_pretrained("/nonexistent", o) end,
    "dle.models.gpt2.from_pretrained"},
  ["models.llama.from_pretrained"] = {function(o) return dle.models.llama.from_pretrained("/nonexistent", o) end,
    "dle.models.llama.from_pretrained"},
  ["GPT2:generate"] = {function(o)
    local m = dle.models.gpt2.GPT2({vocab_size = 8, n_positions = 8, n_layer = 1, n_embd = 4, n_head = 1})
    return m:generate(dle.tensor({1}, I64), o)
  end, "generate"},
  ["nn.MultiheadAttention"] = {function(o) return nn.MultiheadAttention(4, 2, o) end, "MultiheadAttention"},
  ["nn.TransformerBlock"] = {function(o) return nn.TransformerBlock(4, 2, o) end, "TransformerBlock"},
  ["nn.CrossEntropyLoss"] = {function(o) return nn.CrossEntropyLoss(o) end, "CrossEntropyLoss"},
  ["nn.NLLLoss"] = {function(o) return nn.NLLLoss(o) end, "NLLLoss"},
  ["nn.MSELoss"] = {function(o) return nn.MSELoss(o) end, "MSELoss"},
  ["nn.BCEWithLogitsLoss"] = {function(o) return nn.BCEWithLogitsLoss(o) end, "BCEWithLogitsLoss"},
  ["nn.L1Loss"] = {function(o) return nn.L1Loss(o) end, "L1Loss"},
  ["nn.SmoothL1Loss"] = {function(o) return nn.SmoothL1Loss(o) end, "SmoothL1Loss"},
  ["nn.HuberLoss"] = {function(o) return nn.HuberLoss(o) end, "HuberLoss"},
  ["nn.KLDivLoss"] = {function(o) return nn.KLDivLoss(o) end, "KLDivLoss"},
  ["nn.BCELoss"] = {function(o) return nn.BCELoss(o) end, "BCELoss"},
  ["nn.PoissonNLLLoss"] = {function(o) return nn.PoissonNLLLoss(o) end, "PoissonNLLLoss"},
  ["nn.CosineEmbeddingLoss"] = {function(o) return nn.CosineEmbeddingLoss(o) end, "CosineEmbeddingLoss"},
  ["nn.MarginRankingLoss"] = {function(o) return nn.MarginRankingLoss(o) end, "MarginRankingLoss"},
  ["nn.TripletMarginLoss"] = {function(o) return nn.TripletMarginLoss(o) end, "TripletMarginLoss"},
  ["nn.MultiLabelSoftMarginLoss"] = {function(o) return nn.MultiLabelSoftMarginLoss(o) end, "MultiLabelSoftMarginLoss"},
  ["nn.HingeEmbeddingLoss"] = {function(o) return nn.HingeEmbeddingLoss(o) end, "HingeEmbeddingLoss"},
  ["nn.SoftMarginLoss"] = {function(o) return nn.SoftMarginLoss(o) end, "SoftMarginLoss"},
  ["nn.GaussianNLLLoss"] = {function(o) return nn.GaussianNLLLoss(o) end, "GaussianNLLLoss"},
  ["nn.PReLU"] = {function(o) return nn.PReLU(3, 0.25, o) end, "PReLU"},
  ["nn.RNN"] = {function(o) return nn.RNN(3, 2, o) end, "RNN"},
  ["nn.LSTM"] = {function(o) return nn.LSTM(3, 2, o) end, "LSTM"},
  ["nn.GRU"] = {function(o) return nn.GRU(3, 2, o) end, "GRU"},
  ["nn.RNNCell"] = {function(o) return nn.RNNCell(3, 2, o) end, "RNNCell"},
  ["nn.LSTMCell"] = {function(o) return nn.LSTMCell(3, 2, o) end, "LSTMCell"},
  ["nn.GRUCell"] = {function(o) return nn.GRUCell(3, 2, o) end, "GRUCell"},
  ["nn.CTCLoss"] = {function(o) return nn.CTCLoss(o) end, "CTCLoss"},
  ["nn.MultiMarginLoss"] = {function(o) return nn.MultiMarginLoss(o) end, "MultiMarginLoss"},
  ["nn.MultiLabelMarginLoss"] = {function(o) return nn.MultiLabelMarginLoss(o) end, "MultiLabelMarginLoss"},
  ["nn.functional.multi_margin_loss"] = {function(o) return F.multi_margin_loss(x, dle.tensor({1, 2}, I64), o) end,
    "multi_margin_loss"},
  ["nn.functional.multilabel_margin_loss"] = {function(o)
    return F.multilabel_margin_loss(x, dle.tensor({{1, 0, 0}, {2, 3, 0}}, I64), o)
  end, "multilabel_margin_loss"},
  ["nn.functional.ctc_loss"] = {function(o)
    return F.ctc_loss(dle.randn(3, 1, 3):log_softmax(3), dle.tensor({{2}}, I64), {3}, {1}, o)
  end, "ctc_loss"},
  ["Module:zero_grad"] = {function(o) return nn.Linear(3, 2):zero_grad(o) end, "Linear:zero_grad"},
  ["Module:load_state_dict"] = {function(o)
    local m = nn.Linear(3, 2)
    return m:load_state_dict(m:state_dict(), o)
  end, "load_state_dict"},
  ["Module:summary"] = {function(o) return nn.Linear(3, 2):summary({1, 3}, o) end, "Linear:summary"},
  ["MultiheadAttention:forward"] = {function(o)
    return nn.MultiheadAttention(4, 2)(dle.randn(1, 2, 4), o)
  end, "MultiheadAttention:forward"},
  ["TransformerBlock:forward"] = {function(o)
    return nn.TransformerBlock(4, 2)(dle.randn(1, 2, 4), o)
  end, "MultiheadAttention:forward"},
  -- dle.nn.functional
  ["nn.functional.l1_loss"] = {function(o) return F.l1_loss(p01, p01, o) end, "l1_loss"},
  ["nn.functional.pad"] = {function(o) return F.pad(x, {1, 1}, o) end, "pad"},
  ["rewrite.discover"] = {function(o)
    local args = {ops = {"neg"}, max_nodes = 1}
    for k, v in pairs(o) do args[k] = v end
    return dle.rewrite.discover(args)
  end, "rewrite.discover"},
  ["nn.functional.smooth_l1_loss"] = {function(o) return F.smooth_l1_loss(p01, p01, o) end, "smooth_l1_loss"},
  ["nn.functional.huber_loss"] = {function(o) return F.huber_loss(p01, p01, o) end, "huber_loss"},
  ["nn.functional.kl_div"] = {function(o) return F.kl_div(p01, p01, o) end, "kl_div"},
  ["nn.functional.binary_cross_entropy"] = {function(o) return F.binary_cross_entropy(p01, p01, o) end,
    "binary_cross_entropy"},
  ["nn.functional.poisson_nll_loss"] = {function(o) return F.poisson_nll_loss(p01, p01, o) end, "poisson_nll_loss"},
  ["nn.functional.cosine_embedding_loss"] = {function(o) return F.cosine_embedding_loss(x, x, dle.ones(2), o) end,
    "cosine_embedding_loss"},
  ["nn.functional.margin_ranking_loss"] = {function(o) return F.margin_ranking_loss(x, x, x, o) end,
    "margin_ranking_loss"},
  ["nn.functional.triplet_margin_loss"] = {function(o) return F.triplet_margin_loss(p01, p01, p01, o) end,
    "triplet_margin_loss"},
  ["nn.functional.multilabel_soft_margin_loss"] = {function(o) return F.multilabel_soft_margin_loss(p01, p01, o) end,
    "multilabel_soft_margin_loss"},
  ["nn.functional.hinge_embedding_loss"] = {function(o) return F.hinge_embedding_loss(p01, p01, o) end,
    "hinge_embedding_loss"},
  ["nn.functional.soft_margin_loss"] = {function(o) return F.soft_margin_loss(p01, p01, o) end, "soft_margin_loss"},
  ["nn.functional.gaussian_nll_loss"] = {function(o) return F.gaussian_nll_loss(p01, p01, p01, o) end,
    "gaussian_nll_loss"},
  ["nn.functional.dropout"] = {function(o) return F.dropout(x, 0.5, true, o) end, "dropout"},
  ["nn.functional.embedding"] = {function(o) return F.embedding(t, dle.randn(4, 2), o) end, "embedding"},
  ["nn.functional.conv2d"] = {function(o) return F.conv2d(img, dle.randn(2, 2, 3, 3), nil, o) end, "conv2d"},
  ["nn.functional.max_pool2d"] = {function(o) return F.max_pool2d(img, 2, o) end, "max_pool2d"},
  ["nn.functional.avg_pool2d"] = {function(o) return F.avg_pool2d(img, 2, o) end, "avg_pool2d"},
  ["nn.functional.batch_norm"] = {function(o)
    return F.batch_norm(x, dle.zeros(3), dle.ones(3), nil, nil, true, 0.1, 1e-5, o)
  end, "batch_norm"},
  ["nn.functional.scaled_dot_product_attention"] = {function(o)
    local q = dle.randn(1, 2, 4)
    return F.scaled_dot_product_attention(q, q, q, o)
  end, "scaled_dot_product_attention"},
  -- dle.nn.init and dle.nn.utils
  ["nn.init.uniform_"] = {function(o) return nn.init.uniform_(dle.zeros(2, 2), 0, 1, o) end, "uniform_"},
  ["nn.init.normal_"] = {function(o) return nn.init.normal_(dle.zeros(2, 2), 0, 1, o) end, "normal_"},
  ["nn.init.xavier_uniform_"] = {function(o) return nn.init.xavier_uniform_(dle.zeros(2, 2), 1, o) end, "uniform_"},
  ["nn.init.xavier_normal_"] = {function(o) return nn.init.xavier_normal_(dle.zeros(2, 2), 1, o) end, "normal_"},
  ["nn.init.kaiming_uniform_"] = {function(o) return nn.init.kaiming_uniform_(dle.zeros(2, 2), o) end,
                                  "kaiming_uniform_"},
  ["nn.init.kaiming_normal_"] = {function(o) return nn.init.kaiming_normal_(dle.zeros(2, 2), o) end, "kaiming_normal_"},
  ["nn.init.trunc_normal_"] = {function(o) return nn.init.trunc_normal_(dle.zeros(2, 2), 1, -2, 2, o) end,
                               "trunc_normal_"},
  ["nn.utils.clip_grad_norm_"] = {function(o) return nn.utils.clip_grad_norm_(params(), 1, o) end, "clip_grad_norm_"},
  ["nn.utils.quantize_"] = {function(o) return nn.utils.quantize_(nn.Linear(32, 4), "q8_0", o) end, "quantize_"},
  -- dle.optim and its schedulers
  ["optim.SGD"] = {function(o) return dle.optim.SGD(params(), o) end, "SGD"},
  ["optim.Adam"] = {function(o) return dle.optim.Adam(params(), o) end, "Adam"},
  ["optim.functional.adam"] = {function(o)
    local p = params()
    return dle.optim.functional.adam(p, {dle.ones(2)}, {}, o)
  end, "optim.functional.adam"},
  ["optim.Adamax"] = {function(o) return dle.optim.Adamax(params(), o) end, "Adamax"},
  ["optim.NAdam"] = {function(o) return dle.optim.NAdam(params(), o) end, "NAdam"},
  ["optim.RAdam"] = {function(o) return dle.optim.RAdam(params(), o) end, "RAdam"},
  ["optim.LBFGS"] = {function(o) return dle.optim.LBFGS(params(), o) end, "LBFGS"},
  ["optim.functional.adamax"] = {function(o) return dle.optim.functional.adamax(params(), {dle.ones(2)}, {}, o) end,
    "optim.functional.adamax"},
  ["optim.functional.nadam"] = {function(o) return dle.optim.functional.nadam(params(), {dle.ones(2)}, {}, o) end,
    "optim.functional.nadam"},
  ["optim.functional.radam"] = {function(o) return dle.optim.functional.radam(params(), {dle.ones(2)}, {}, o) end,
    "optim.functional.radam"},
  ["optim.AdamW"] = {function(o) return dle.optim.AdamW(params(), o) end, "AdamW"},
  ["optim.Adagrad"] = {function(o) return dle.optim.Adagrad(params(), o) end, "Adagrad"},
  ["optim.RMSprop"] = {function(o) return dle.optim.RMSprop(params(), o) end, "RMSprop"},
  ["optim param group"] = {function(o)
    o.params = params()
    return dle.optim.SGD({o}, {lr = 0.1})
  end, "SGD"},
  ["optim.lr.cosine"] = {function(o) o.total = 10; return dle.optim.lr.cosine(opt(), o) end, "lr.cosine"},
  ["optim.lr.step"] = {function(o) o.step_size = 2; return dle.optim.lr.step(opt(), o) end, "lr.step"},
  ["optim.lr.lambda"] = {function(o) o.lr_lambda = function() return 1 end; return dle.optim.lr.lambda(opt(), o) end,
    "lr.lambda"},
  ["optim.lr.multiplicative"] = {function(o) o.lr_lambda = function() return 1 end
    return dle.optim.lr.multiplicative(opt(), o) end, "lr.multiplicative"},
  ["optim.lr.exponential"] = {function(o) o.gamma = 0.5; return dle.optim.lr.exponential(opt(), o) end,
    "lr.exponential"},
  ["optim.lr.linear"] = {function(o) return dle.optim.lr.linear(opt(), o) end, "lr.linear"},
  ["optim.lr.one_cycle"] = {function(o) o.max_lr = 1; o.total_steps = 10; return dle.optim.lr.one_cycle(opt(), o) end,
    "lr.one_cycle"},
  ["optim.lr.cosine_warm_restarts"] = {function(o) o.T_0 = 2; return dle.optim.lr.cosine_warm_restarts(opt(), o) end,
    "lr.cosine_warm_restarts"},
  ["optim.lr.sequential"] = {function(o)
    local op = opt()
    o.schedulers, o.milestones = {dle.optim.lr.linear(op)}, {}
    return dle.optim.lr.sequential(op, o)
  end, "lr.sequential"},
  ["optim.lr.reduce_lr_on_plateau"] = {function(o) return dle.optim.lr.reduce_lr_on_plateau(opt(), o) end,
    "lr.reduce_lr_on_plateau"},
  ["optim.lr.chained"] = {function(o)
    local op = opt()
    o.schedulers = {dle.optim.lr.exponential(op, {gamma = 0.5})}
    return dle.optim.lr.chained(op, o)
  end, "lr.chained"},
  -- dle.amp, dle.dist, dle.rewrite, dle.data, the REPL
  ["amp.GradScaler"] = {function(o) return dle.amp.GradScaler(o) end, "GradScaler"},
  ["dist.DistributedDataParallel"] = {function(o) return dle.dist.DistributedDataParallel(nn.Linear(2, 2), o) end,
    "DistributedDataParallel"},
  ["rewrite.apply"] = {function(o)
    local g = dle.graph.trace(function(a) return a * 1 end, x)
    return dle.rewrite.apply(g, {}, o)
  end, "rewrite.apply"},
  ["rewrite.verify"] = {function(o) return dle.rewrite.verify(dle.rewrite.rules.algebra[1], o) end, "rewrite.verify"},
  ["rewrite.pattern.const"] = {function(o) return dle.rewrite.pattern.const(1, o) end, "pattern.const"},
  ["rewrite.pattern.op"] = {function(o) return dle.rewrite.pattern.mul(dle.rewrite.pattern.any("x"), o) end,
                            "pattern.mul"},
  ["data.DataLoader"] = {function(o) return dle.data.DataLoader({x}, o) end, "DataLoader"},
  ["repl.run"] = {function(o) return require("dle.repl").run(o) end, "repl.run"},
  -- dle's own functions (C): creation, random, nn ops, autograd, arithmetic
  ["zeros"] = {function(o) return dle.zeros(2, o) end, "zeros"},
  ["ones"] = {function(o) return dle.ones(2, o) end, "ones"},
  ["empty"] = {function(o) return dle.empty(2, o) end, "empty"},
  ["full"] = {function(o) return dle.full({2}, 1, o) end, "full"},
  ["arange"] = {function(o) return dle.arange(1, 3, o) end, "arange"},
  ["linspace"] = {function(o) return dle.linspace(0, 1, 3, o) end, "linspace"},
  ["eye"] = {function(o) return dle.eye(2, o) end, "eye"},
  ["tensor"] = {function(o) return dle.tensor({1, 2}, o) end, "tensor"},
  ["zeros_like"] = {function(o) return dle.zeros_like(x, o) end, "zeros_like"},
  ["ones_like"] = {function(o) return dle.ones_like(x, o) end, "ones_like"},
  ["empty_like"] = {function(o) return dle.empty_like(x, o) end, "empty_like"},
  ["full_like"] = {function(o) return dle.full_like(x, 2, o) end, "full_like"},
  ["rand"] = {function(o) return dle.rand(2, o) end, "rand"},
  ["randn"] = {function(o) return dle.randn(2, o) end, "randn"},
  ["randint"] = {function(o) return dle.randint(1, 5, {2}, o) end, "randint"},
  ["rand_like"] = {function(o) return dle.rand_like(x, o) end, "rand_like"},
  ["randn_like"] = {function(o) return dle.randn_like(x, o) end, "randn_like"},
  ["randperm"] = {function(o) return dle.randperm(3, o) end, "randperm"},
  ["bernoulli"] = {function(o) return dle.bernoulli(dle.rand(2), o) end, "bernoulli"},
  ["Tensor:uniform_"] = {function(o) return dle.zeros(2):uniform_(0, 1, o) end, "uniform_"},
  ["Tensor:normal_"] = {function(o) return dle.zeros(2):normal_(0, 1, o) end, "normal_"},
  ["Tensor:random_"] = {function(o) return dle.zeros(2):random_(1, 5, o) end, "random_"},
  ["Tensor:bernoulli_"] = {function(o) return dle.zeros(2):bernoulli_(0.5, o) end, "bernoulli_"},
  ["soft_cross_entropy"] = {function(o) return dle.soft_cross_entropy(x, x, o) end, "soft_cross_entropy"},
  ["embedding"] = {function(o) return dle.embedding(dle.randn(4, 2), t, o) end, "embedding"},
  ["dropout"] = {function(o) return dle.dropout(x, 0.5, o) end, "dropout"},
  ["sdpa"] = {function(o) local q = dle.randn(1, 2, 4); return dle.sdpa(q, q, q, o) end, "sdpa"},
  ["conv2d"] = {function(o) return dle.conv2d(img, dle.randn(2, 2, 3, 3), nil, o) end, "conv2d"},
  ["max_pool2d"] = {function(o) return dle.max_pool2d(img, 2, o) end, "max_pool2d"},
  ["avg_pool2d"] = {function(o) return dle.avg_pool2d(img, 2, o) end, "avg_pool2d"},
  ["add"] = {function(o) return dle.add(x, x, o) end, "add"},
  ["sub"] = {function(o) return x:sub(x, o) end, "sub"},
  ["matmul"] = {function(o) return dle.matmul(x, x:t(), o) end, "matmul"},
  ["sort"] = {function(o) return dle.sort(x, 1, o) end, "sort"},
  ["argsort"] = {function(o) return x:argsort(1, o) end, "argsort"},
  ["topk"] = {function(o) return dle.topk(x, 1, 1, o) end, "topk"},
  ["kthvalue"] = {function(o) return x:kthvalue(1, 1, o) end, "kthvalue"},
  ["nonzero"] = {function(o) return dle.nonzero(x, o) end, "nonzero"},
  ["searchsorted"] = {function(o) return dle.searchsorted(dle.zeros(3), x, o) end, "searchsorted"},
  ["bincount"] = {function(o) return dle.bincount(t, o) end, "bincount"},
  ["mode"] = {function(o) return x:mode(1, o) end, "mode"},
  ["scatter"] = {function(o) return x:scatter(1, t:view(2, 1), 1, o) end, "scatter"},
  ["scatter_reduce"] = {function(o) return x:scatter_reduce(1, t:view(2, 1), x, "sum", o) end, "scatter_reduce"},
  ["unique"] = {function(o) return dle.unique(x, o) end, "unique"},
  ["unique_consecutive"] = {function(o) return x:unique_consecutive(o) end, "unique_consecutive"},
  ["bucketize"] = {function(o) return dle.bucketize(x, dle.zeros(3), o) end, "bucketize"},
  ["index_put"] = {function(o) return x:index_put({t}, 1, o) end, "index_put"},
  ["quantile"] = {function(o) return x:quantile(0.5, 1, false, o) end, "quantile"},
  ["nanquantile"] = {function(o) return dle.nanquantile(x, 0.5, nil, nil, o) end, "nanquantile"},
  ["Tensor:backward"] = {function(o) return (x:requires_grad_() * 1):sum():backward(o) end, "backward"},
  ["backward"] = {function(o) return dle.backward({(x:requires_grad_() * 1):sum()}, nil, o) end, "backward"},
  ["grad"] = {function(o) local a = dle.randn(2):requires_grad_(); return dle.grad({a:sum()}, {a}, o) end, "grad"},
  ["gradcheck"] = {function(o) return dle.gradcheck(function(a) return a * 2 end, {dle.randn(2)}, o) end, "gradcheck"},
  ["autocast"] = {function(o) o.dtype = "bfloat16"; return dle.autocast(o, function() end) end, "autocast"},
  ["set_printoptions"] = {function(o) return dle.set_printoptions(o) end, "set_printoptions"},
  -- dle.linalg (lua/dle/linalg.lua)
  ["linalg.solve"] = {function(o) return dle.linalg.solve(dle.eye(2), dle.ones(2), o) end, "linalg.solve"},
  ["linalg.cholesky"] = {function(o) return dle.linalg.cholesky(dle.eye(2), o) end, "linalg.cholesky"},
  ["linalg.qr"] = {function(o) return dle.linalg.qr(x, o) end, "linalg.qr"},
  ["linalg.svd"] = {function(o) return dle.linalg.svd(x, o) end, "linalg.svd"},
  ["linalg.eigh"] = {function(o) return dle.linalg.eigh(dle.eye(2), o) end, "linalg.eigh"},
  ["linalg.eigvalsh"] = {function(o) return dle.linalg.eigvalsh(dle.eye(2), o) end, "linalg.eigvalsh"},
  ["linalg.vector_norm"] = {function(o) return dle.linalg.vector_norm(x, 2, nil, o) end, "linalg.vector_norm"},
  ["linalg.matrix_norm"] = {function(o) return dle.linalg.matrix_norm(x, "fro", nil, o) end, "linalg.matrix_norm"},
  ["linalg.norm"] = {function(o) return dle.linalg.norm(x, nil, nil, o) end, "linalg.norm"},
  ["linalg.pinv"] = {function(o) return dle.linalg.pinv(x, o) end, "linalg.pinv"},
  ["linalg.lstsq"] = {function(o) return dle.linalg.lstsq(x, dle.ones(2), o) end, "linalg.lstsq"},
  ["linalg.cross"] = {function(o) return dle.linalg.cross(dle.ones(3), dle.ones(3), o) end, "linalg.cross"},
  -- N-d convolutions, unfold/fold, 1-D and adaptive pools (lua/dle/nn/functional_convnd.lua, functional_pool.lua)
  ["nn.functional.conv1d"] = {function(o) return F.conv1d(x:reshape(1, 2, 3), dle.randn(2, 2, 1), nil, o) end,
    "conv1d"},
  ["nn.functional.conv3d"] = {function(o)
    return F.conv3d(img:reshape(1, 2, 1, 4, 4), dle.randn(2, 2, 1, 1, 1), nil, o)
  end, "conv3d"},
  ["nn.functional.conv_transpose1d"] = {function(o)
    return F.conv_transpose1d(x:reshape(1, 2, 3), dle.randn(2, 2, 1), nil, o)
  end, "conv_transpose1d"},
  ["nn.functional.conv_transpose2d"] = {function(o) return F.conv_transpose2d(img, dle.randn(2, 2, 1, 1), nil, o) end,
    "conv_transpose2d"},
  ["nn.functional.conv_transpose3d"] = {function(o)
    return F.conv_transpose3d(img:reshape(1, 2, 1, 4, 4), dle.randn(2, 2, 1, 1, 1), nil, o)
  end, "conv_transpose3d"},
  ["nn.functional.unfold"] = {function(o) return F.unfold(img, 2, o) end, "unfold"},
  ["nn.functional.fold"] = {function(o) return F.fold(dle.randn(1, 4, 9), 4, 2, o) end, "fold"},
  ["nn.functional.max_pool1d"] = {function(o) return F.max_pool1d(x:reshape(1, 2, 3), 2, o) end, "max_pool1d"},
  ["nn.functional.max_pool3d"] = {function(o) return F.max_pool3d(img:reshape(1, 2, 1, 4, 4), 1, o) end, "max_pool3d"},
  ["nn.functional.avg_pool3d"] = {function(o) return F.avg_pool3d(img:reshape(1, 2, 1, 4, 4), 1, o) end, "avg_pool3d"},
  ["nn.MaxPool3d"] = {function(o) return nn.MaxPool3d(1, 1, o) end, "MaxPool3d"},
  ["nn.AvgPool3d"] = {function(o) return nn.AvgPool3d(1, 1, o) end, "AvgPool3d"},
  ["nn.functional.avg_pool1d"] = {function(o) return F.avg_pool1d(x:reshape(1, 2, 3), 2, o) end, "avg_pool1d"},
  ["nn.functional.adaptive_max_pool1d"] = {function(o) return F.adaptive_max_pool1d(x:reshape(1, 2, 3), 2, o) end,
    "adaptive_max_pool1d"},
  ["nn.functional.adaptive_max_pool2d"] = {function(o) return F.adaptive_max_pool2d(img, 2, o) end,
    "adaptive_max_pool2d"},
  ["nn.Conv1d"] = {function(o) return nn.Conv1d(2, 2, 3, o) end, "Conv1d"},
  ["nn.Conv3d"] = {function(o) return nn.Conv3d(2, 2, 3, o) end, "Conv3d"},
  ["nn.ConvTranspose1d"] = {function(o) return nn.ConvTranspose1d(2, 2, 3, o) end, "ConvTranspose1d"},
  ["nn.ConvTranspose2d"] = {function(o) return nn.ConvTranspose2d(2, 2, 3, o) end, "ConvTranspose2d"},
  ["nn.ConvTranspose3d"] = {function(o) return nn.ConvTranspose3d(2, 2, 3, o) end, "ConvTranspose3d"},
  ["nn.Unfold"] = {function(o) return nn.Unfold(2, o) end, "Unfold"},
  ["nn.Fold"] = {function(o) return nn.Fold(4, 2, o) end, "Fold"},
  ["nn.MaxPool1d"] = {function(o) return nn.MaxPool1d(2, 2, o) end, "MaxPool1d"},
  ["nn.AvgPool1d"] = {function(o) return nn.AvgPool1d(2, 2, o) end, "AvgPool1d"},
  ["nn.AdaptiveMaxPool1d"] = {function(o) return nn.AdaptiveMaxPool1d(2, o) end, "AdaptiveMaxPool1d"},
  ["nn.AdaptiveMaxPool2d"] = {function(o) return nn.AdaptiveMaxPool2d(2, o) end, "AdaptiveMaxPool2d"},
  -- normalization and resampling layers (lua/dle/nn/norm_layers.lua, resample_layers.lua)
  ["nn.GroupNorm"] = {function(o) return nn.GroupNorm(1, 2, o) end, "GroupNorm"},
  ["nn.InstanceNorm1d"] = {function(o) return nn.InstanceNorm1d(2, o) end, "InstanceNorm1d"},
  ["nn.InstanceNorm2d"] = {function(o) return nn.InstanceNorm2d(2, o) end, "InstanceNorm2d"},
  ["nn.InstanceNorm3d"] = {function(o) return nn.InstanceNorm3d(2, o) end, "InstanceNorm3d"},
  ["nn.LocalResponseNorm"] = {function(o) return nn.LocalResponseNorm(2, o) end, "LocalResponseNorm"},
  ["nn.Upsample"] = {function(o) o.size = 2; return nn.Upsample(o) end, "Upsample"},
  ["nn.UpsamplingNearest2d"] = {function(o) o.size = 2; return nn.UpsamplingNearest2d(o) end, "UpsamplingNearest2d"},
  ["nn.UpsamplingBilinear2d"] = {function(o) o.size = 2; return nn.UpsamplingBilinear2d(o) end,
                                 "UpsamplingBilinear2d"},
  ["nn.Bilinear"] = {function(o) return nn.Bilinear(2, 2, 2, o) end, "Bilinear"},
  ["nn.functional.interpolate"] = {function(o) o.size = 2; return F.interpolate(img, o) end, "interpolate"},
  ["upsample"] = {function(o) return dle.upsample(img, {2, 2}, o) end, "upsample"},
  ["upsample_backward"] = {function(o) return img:upsample_backward({2, 2}, o) end, "upsample_backward"},
  -- lua/dle/distance.lua, lua/dle/arrange.lua
  ["cdist"] = {function(o) return dle.cdist(x, x, o) end, "cdist"},
  ["meshgrid"] = {function(o) return dle.meshgrid(dle.ones(2), dle.ones(3), o) end, "meshgrid"},
  ["baddbmm"] = {function(o) local b = dle.ones(1, 2, 2); return dle.baddbmm(b, b, b, o) end, "baddbmm"},
  ["addbmm"] = {function(o) local b = dle.ones(1, 2, 2); return dle.addbmm(dle.ones(2, 2), b, b, o) end, "addbmm"},
  ["addmv"] = {function(o) return dle.addmv(dle.ones(2), x, dle.ones(3), o) end, "addmv"},
  ["addr"] = {function(o) return dle.addr(x, dle.ones(2), dle.ones(3), o) end, "addr"},
}
-- the losses dle and dle.nn.functional both have, called with the same arguments
for name, target in pairs({cross_entropy = t, nll_loss = t, mse_loss = x, binary_cross_entropy_with_logits = x}) do
  with_options[name] = {function(o) return dle[name](x, target, o) end, name}
  with_options["nn.functional." .. name] = {function(o) return F[name](x, target, o) end, name}
end

-- The public names of the walked packages that take no options table.
local without_options = {
  nn = {"Module", "Parameter", "Sequential", "Flatten", "Identity", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
        "Softmax", "LogSoftmax", "functional", "init", "utils", "LeakyReLU", "ELU", "SELU", "CELU", "Softplus",
        "Softsign", "Mish", "Hardswish", "Hardsigmoid", "Hardtanh", "ReLU6", "GLU", "LogSigmoid", "Softmin",
        "Tanhshrink", "Softshrink", "Hardshrink", "ModuleList", "ModuleDict", "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Unflatten"},
  ["nn.functional"] = {"relu", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "linear",
                       "layer_norm", "one_hot", "causal_mask", "leaky_relu", "elu", "selu", "celu", "softplus",
                       "softsign", "mish", "hardswish", "hardsigmoid", "hardtanh", "relu6", "prelu", "glu",
                       "logsigmoid", "softmin", "tanhshrink", "softshrink", "hardshrink", "cosine_similarity",
                       "normalize", "pairwise_distance", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
                       "group_norm", "instance_norm", "local_response_norm", "pixel_shuffle", "pixel_unshuffle",
                       "channel_shuffle", "bilinear"},
  ["nn.init"] = {"calculate_fans", "calculate_gain", "constant_", "ones_", "zeros_"},
  ["nn.utils"] = {"parameters_to_vector", "vector_to_parameters"},
  -- Optimizer is the base class; ZeroRedundancyOptimizer checks its options with the optimizer
  -- class it wraps, after dle.dist.init() (tested in dist_spec)
  optim = {"Optimizer", "ZeroRedundancyOptimizer", "lr", "functional"},
  ["optim.lr"] = {"Scheduler"},
  amp = {},
  -- the collectives take {group, tag} but need dle.dist.init(): dist_spec's exchange worker checks an unknown one
  dist = {"abort", "all_reduce", "barrier", "broadcast", "finalize", "init", "is_available", "is_initialized",
          "rank", "world_size", "all_gather", "reduce_scatter", "send", "recv", "new_group", "tensor_parallel",
          "isend", "pipeline"},
  -- rule takes a rule's spec {name, pattern, replace}, checked by rewrite.rule itself
  rewrite = {"build", "flatten", "is_rule", "rule", "rules", "pattern"},
  models = {"gpt2", "llama", "from_gguf"},
  ["models.gpt2"] = {"from_llmc"},
  ["models.llama"] = {},
  tokenizer = {"load", "new", "Tokenizer"},
  linalg = {"inv", "det", "slogdet", "svdvals", "matrix_power"},
}

local function package(path)
  local p = dle
  for part in path:gmatch("[^.]+") do p = p[part] end
  return p
end

describe("unknown options", function()
  it("every public function and class of the Lua packages is classified as taking options or not", function()
    for path, without in pairs(without_options) do
      local no = {}
      for _, n in ipairs(without) do no[n] = true end
      for name, v in pairs(package(path)) do
        if type(v) == "function" or type(v) == "table" then
          local key = path .. "." .. name
          assert.is_true(no[name] or with_options[key] ~= nil,
            key .. " is neither called with options here nor listed as taking none")
        end
      end
    end
  end)

  local names = {}
  for name in pairs(with_options) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local call, fname = with_options[name][1], with_options[name][2]
    it(name .. " raises an error naming " .. fname .. " and bogus_option", function()
      local o = {}
      for k, v in pairs(BOGUS) do o[k] = v end
      local ok, err = pcall(call, o)
      assert.is_false(ok, name .. " accepted {bogus_option = 1}")
      err = tostring(err)
      assert.truthy(err:find(fname .. ": unknown option 'bogus_option' (known: ", 1, true), err)
    end)
  end

  it("the message lists the known options, sorted", function()
    local ok, err = pcall(F.cross_entropy, x, t, {wieght = dle.ones(3)})
    assert.is_false(ok)
    assert.truthy(err:find("cross_entropy: unknown option 'wieght' (known: ignore_index, label_smoothing, "
      .. "reduction, weight)", 1, true), err)
    ok, err = pcall(dle.zeros, 2, {dtyp = "float64"})
    assert.is_false(ok)
    assert.truthy(err:find("zeros: unknown option 'dtyp' (known: device, dtype, generator, requires_grad)", 1, true),
                  err)
  end)

  it("a non-table options argument is an error naming the function and what was given", function()
    local ok, err = pcall(F.cross_entropy, x, t, 3)
    assert.is_false(ok)
    assert.truthy(err:find("cross_entropy: options must be a table, got number 3", 1, true), err)
  end)

  it("valid options still work (one of each kind)", function()
    assert.are.equal("float64", dle.zeros(2, {dtype = "float64", requires_grad = false}):dtype())
    assert.are.equal(0, nn.Linear(3, 2, {bias = false, dtype = "float32"}).bias == nil and 0 or 1)
    assert.are.equal(0.5, dle.optim.SGD(params(), {lr = 0.5, momentum = 0.9}).param_groups[1].lr)
    assert.is_true(F.cross_entropy(x, t, {reduction = "sum", label_smoothing = 0.1, ignore_index = 2,
      weight = dle.ones(3)}):item() > 0)
    assert.are.equal(2, dle.add(x, x, {alpha = 2}):size(1))
    assert.are.equal(4, #dle.rand(4, {generator = dle.Generator(1)}):totable())
  end)
end)
