--- Fashion-MNIST with a multilayer perceptron (784-256-128-10, ReLU), trained with Adam and a
-- cosine learning-rate schedule with warmup. The dataset's own benchmark table lists an MLP
-- 256-128-100 at 0.8833 test accuracy; this one reached 0.887 after 5 epochs (seed 0).
-- Prints loss, test accuracy and throughput per epoch.
--   scripts/dle examples/fashion_mnist/mlp.lua [--epochs 5] [--batch-size 128] [--lr 2e-3]
local dle = require("dle")

local cli = require("argparse")("mlp.lua", "Fashion-MNIST with a 784-256-128-10 MLP.")
cli:option("--epochs", "training epochs", 5, tonumber)
cli:option("--batch-size", "batch size", 128, math.tointeger)
cli:option("--lr", "peak learning rate", 2e-3, tonumber)
cli:option("--log-dir", "where the run's JSONL log and SVG curves go", "runs")
local args = cli:parse(arg)
local epochs, batch_size, lr = args.epochs, args.batch_size, args.lr
dle.manual_seed(0)

local here = arg[0]:match("^(.*/)") or ""
local common, models = dofile(here .. "common.lua"), dofile(here .. "models.lua")
local train_x, train_y, test_x, test_y = common.load()
train_x, test_x = train_x:view(-1, 784), test_x:view(-1, 784)

local model = models.mlp()
model:summary({batch_size, 784})

local opt = dle.optim.Adam(model:parameters(), {lr = lr})
common.fit(model, opt, {train_x, train_y, test_x, test_y}, {epochs = epochs, batch_size = batch_size,
                                                            name = "fashion_mnist_mlp",
                                                            log_dir = args.log_dir})
