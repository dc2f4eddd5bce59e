--- The Fashion-MNIST models, shared by the examples (mlp.lua, cnn.lua) and scripts/bench (its
-- training-step figures time exactly these): dofile this file to get {mlp = ..., cnn = ...}.
local nn = require("dle").nn

local M = {}

--- 784-256-128-10 with ReLU (the dataset README's MLP row has 256-128-100).
function M.mlp()
  return nn.Sequential(
    nn.Linear(784, 256), nn.ReLU(),
    nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, 10))
end

--- 2 x (Conv 3x3 pad 1 - BatchNorm - ReLU - MaxPool 2) - Linear 3136-128 - BatchNorm - ReLU
-- [- Dropout] - Linear 128-10, the README's "2 Conv + pooling + BN" shape. opts.dropout: rate before
-- the last layer (default 0: none); opts.width: channels of the first conv (default 32); opts.fc_bn
-- = false leaves out the hidden layer's BatchNorm (which adds 0.3-0.5 points after 3 epochs).
function M.cnn(opts)
  local dropout = opts and opts.dropout or 0
  local c = opts and opts.width or 32   -- channels of the first conv; the second has twice as many
  local fc_bn = not (opts and opts.fc_bn == false)
  return nn.Sequential(
    nn.Conv2d(1, c, 3, {padding = 1}), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(c, 2 * c, 3, {padding = 1}), nn.BatchNorm2d(2 * c), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(2 * c * 7 * 7, 128), fc_bn and nn.BatchNorm1d(128) or nn.Identity(), nn.ReLU(), nn.Dropout(dropout),
    nn.Linear(128, 10))
end

return M
