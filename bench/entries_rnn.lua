--- bench/entries_rnn.lua — recurrent layers in milliseconds vs PyTorch (issue 17 point 5: an LSTM of
-- 2 layers, hidden 256, sequence 64, batch 32, forward + backward at most 1.0x PyTorch's time at 1
-- and 2 threads), and the same shape for GRU and forward-only LSTM inference. float32, input size
-- 256, time-major input; the parameters' gradients accumulate as in a training step without
-- zero_grad (both sides).
return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  local entries = {}
  local torch_setup = "torch.manual_seed(0)\nm = torch.nn.%s(256, 256, num_layers=2)\nx = torch.randn(64, 32, 256)"
  local function add(key, name, cls, backward)
    entries[#entries + 1] = vs_torch(key, name, 1.0, 3, function()
      local m = dle.nn[cls](256, 256, {num_layers = 2})
      local x = dle.randn(64, 32, 256)
      if backward then return function() m(x):sum():backward() end end
      return function() return dle.no_grad(function() return m(x) end) end
    end, string.format(torch_setup, cls),
      backward and "m(x)[0].sum().backward()" or "with torch.no_grad():\n    y = m(x)")
  end
  add("lstm_train", "LSTM 2x256, seq 64, batch 32: forward + backward", "LSTM", true)
  add("gru_train", "GRU 2x256, seq 64, batch 32: forward + backward", "GRU", true)
  add("lstm_infer", "LSTM 2x256, seq 64, batch 32: forward (no_grad)", "LSTM", false)
  return entries
end
