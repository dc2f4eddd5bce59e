--- dle.nn.RNN, LSTM and GRU (multi-layer, optionally bidirectional) and the single-step RNNCell,
-- LSTMCell and GRUCell, as PyTorch's: the same gate orders (LSTM i, f, g, o; GRU r, z, n with
-- b_hn inside r (...)), parameter names and layouts (weight_ih_l0 {G H, In}, weight_hh_l0,
-- bias_ih_l0, bias_hh_l0, weight_hr_l0 for LSTM's proj_size, "_reverse" for the backward
-- direction), so a PyTorch state dict loads one to one; init U(-1/sqrt(H), 1/sqrt(H)).
--   local lstm = dle.nn.LSTM(10, 20, {num_layers = 2, batch_first = true})
--   local out, h_n, c_n = lstm(x)            -- or lstm(x, {h0, c0}), lstm(x, h0, c0)
-- Returns are PyTorch's (output, (h_n, c_n)) as multiple results: output {L, N, D Hout} (or
-- {N, L, D Hout} with batch_first), h_n {D layers, N, Hout}, c_n {D layers, N, H}; RNN and GRU
-- return output, h_n. Unbatched inputs {L, In} give unbatched results. The layers run on
-- dle.nn.functional_rnn (one input GEMM per layer, a fused op per step).
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local R = require("dle.nn.functional_rnn")

local M = {}

local function shape_str(t) return check.shape_str(t) end

-- U(-1/sqrt(H), 1/sqrt(H)) tensor of the given sizes
local function uniform(sizes, h, opts)
  local bound = 1 / math.sqrt(h)
  local g = opts.generator and {generator = opts.generator} or nil
  return dle.empty(sizes, {dtype = opts.dtype or "float32"}):uniform_(-bound, bound, g):requires_grad_(true)
end

-- Registers one layer's (or cell's) parameters in PyTorch's order under names with suffix sfx.
local function add_params(self, sfx, gh, in_size, h_in, opts)
  self["weight_ih" .. sfx] = uniform({gh, in_size}, self.hidden_size, opts)
  self["weight_hh" .. sfx] = uniform({gh, h_in}, self.hidden_size, opts)
  if self.bias then
    self["bias_ih" .. sfx] = uniform({gh}, self.hidden_size, opts)
    self["bias_hh" .. sfx] = uniform({gh}, self.hidden_size, opts)
  end
end

local function params_of(self, sfx)
  return {w_ih = self["weight_ih" .. sfx], w_hh = self["weight_hh" .. sfx], b_ih = self["bias_ih" .. sfx],
          b_hh = self["bias_hh" .. sfx], w_hr = self["weight_hr" .. sfx]}
end

-- RNN's and RNNCell's nonlinearity option: "tanh" (default) or "relu"
local function nonlinearity(cls, opts)
  local nl = type(opts) == "table" and opts.nonlinearity or "tanh"
  if nl ~= "tanh" and nl ~= "relu" then
    check.error(cls .. ": nonlinearity must be \"tanh\" or \"relu\", got " .. tostring(nl))
  end
  return nl
end

local LAYER_OPTS = {"num_layers", "bias", "batch_first", "dropout", "bidirectional", "dtype", "generator"}
local CELL_OPTS = {"bias", "dtype", "generator"}

-- The options of a layer or cell `cls` (`known` and the class's own `extra`), checked with the
-- sizes; returns them and the mode, which for "RNN" comes from the nonlinearity option
-- ("RNN_TANH" or "RNN_RELU", self.nonlinearity kept).
local function checked_opts(self, cls, mode, known, extra, input_size, hidden_size, opts)
  if mode == "RNN" then
    self.nonlinearity = nonlinearity(cls, opts)
    mode = "RNN_" .. self.nonlinearity:upper()
  end
  known = {table.unpack(known)}
  for _, k in ipairs(extra) do known[#known + 1] = k end
  opts = check.layer_args(cls, opts, known, "positive integer sizes (input_size, hidden_size)", input_size,
                          hidden_size)
  return opts, mode
end

-- ---------------------------------------------------------------- multi-layer modules

local RNNBase = Module:extend("RNNBase")

-- mode: "LSTM", "GRU" or "RNN"; extra: the class's own options
local function base_init(self, cls, mode, input_size, hidden_size, opts, extra)
  opts, mode = checked_opts(self, cls, mode, LAYER_OPTS, extra, input_size, hidden_size, opts)
  local num_layers = opts.num_layers or 1
  check.integer_min(num_layers, cls, "num_layers", 1)
  local dropout = opts.dropout or 0
  check.number_that(dropout, cls, "dropout", "a number in [0, 1]", function(v) return v >= 0 and v <= 1 end)
  local proj = opts.proj_size or 0
  check.integer_min(proj, cls, "proj_size", 0)
  if proj >= hidden_size then
    check.error(string.format("%s: proj_size (%d) must be smaller than hidden_size (%d)", cls, proj, hidden_size))
  end
  for _, k in ipairs({"bias", "batch_first", "bidirectional"}) do
    if opts[k] ~= nil then check.boolean(opts[k], cls, k) end
  end
  self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
  self.num_layers, self.dropout, self.proj_size = num_layers, dropout, proj
  self.bias, self.batch_first = opts.bias ~= false, opts.batch_first == true
  self.bidirectional = opts.bidirectional == true
  local dirs = self.bidirectional and 2 or 1
  local gh = R.GATES[mode] * hidden_size
  local h_out = proj > 0 and proj or hidden_size
  for l = 0, num_layers - 1 do
    for d = 1, dirs do
      local sfx = "_l" .. l .. (d == 2 and "_reverse" or "")
      add_params(self, sfx, gh, l == 0 and input_size or h_out * dirs, h_out, opts)
      if proj > 0 then self["weight_hr" .. sfx] = uniform({proj, hidden_size}, hidden_size, opts) end
    end
  end
end

-- The initial state argument: nil (zeros), a tensor, or (LSTM) a table {h0, c0} or two tensors.
local function initial_state(self, hx, cx)
  if self.mode == "LSTM" and type(hx) == "table" and not dle.is_tensor(hx) then
    if cx ~= nil then check.error("LSTM: give the initial state as {h0, c0} or as h0, c0, not both") end
    hx, cx = hx[1], hx[2]
    if not dle.is_tensor(hx) or not dle.is_tensor(cx) then
      check.error("LSTM: the initial state table must hold two tensors {h0, c0}")
    end
  end
  check.opt_tensor(hx, self.__name, "h0")
  if self.mode ~= "LSTM" and cx ~= nil then
    check.error(self.__name .. ": takes (input, h0), got a third argument")
  end
  check.opt_tensor(cx, self.__name, "c0")
  if self.mode == "LSTM" and (hx == nil) ~= (cx == nil) then
    check.error("LSTM: give both h0 and c0, or neither")
  end
  return hx, cx
end

-- Checks a state against its expected shape (batched: {D layers, N, size}).
local function check_state(self, what, t, want, x)
  local ok = t:dim() == #want
  for i = 1, #want do ok = ok and t:size(i) == want[i] end
  if not ok then
    check.error(string.format("%s: %s has shape %s, expected %s (input shape %s)", self.__name, what,
                              shape_str(t), "{" .. table.concat(want, ",") .. "}", shape_str(x)))
  end
  if t:dtype() ~= x:dtype() then
    check.error(string.format("%s: %s is %s but the input is %s", self.__name, what, t:dtype(), x:dtype()))
  end
end

--- forward(input, hx, cx): input {L, N, In} ({N, L, In} with batch_first, or unbatched {L, In});
-- hx: h0 {D num_layers, N, Hout} (LSTM: {h0, c0} or h0, c0); nil means zeros.
-- @return output, h_n (and c_n for LSTM)
function RNNBase:forward(x, hx, cx)
  local cls = self.__name
  check.tensor(x, cls, "input")
  if x:dim() ~= 2 and x:dim() ~= 3 then
    check.error(string.format("%s: expected a 3-D input %s (or 2-D unbatched {L, In}), got shape %s", cls,
                              self.batch_first and "{N, L, In}" or "{L, N, In}", shape_str(x)))
  end
  if x:size(-1) ~= self.input_size then
    check.error(string.format("%s: input has %d features (shape %s), expected input_size %d", cls, x:size(-1),
                              shape_str(x), self.input_size))
  end
  local w = self.weight_ih_l0
  if x:dtype() ~= w:dtype() then
    check.error(string.format("%s: input is %s (shape %s) but the parameters are %s", cls, x:dtype(),
                              shape_str(x), w:dtype()))
  end
  hx, cx = initial_state(self, hx, cx)
  local batched = x:dim() == 3
  if not batched then
    x = x:unsqueeze(2)
  elseif self.batch_first then
    x = x:transpose(1, 2)
  end
  local L, N = x:size(1), x:size(2)
  if L == 0 then check.error(cls .. ": the input sequence is empty (shape " .. shape_str(x) .. ")") end
  local dirs = self.bidirectional and 2 or 1
  local h_out = self.proj_size > 0 and self.proj_size or self.hidden_size
  local lstm = self.mode == "LSTM"
  local states = {{"h0", hx, h_out}, {"c0", cx, self.hidden_size}}
  for _, s in ipairs(states) do
    local what, t, size = s[1], s[2], s[3]
    if t then
      check_state(self, what, t, batched and {dirs * self.num_layers, N, size} or {dirs * self.num_layers, size}, x)
      if not batched then t = t:unsqueeze(2) end
    else
      t = (what == "h0" or lstm) and dle.zeros(dirs * self.num_layers, N, size, {dtype = x:dtype()}) or nil
    end
    s.t = t
  end
  local h0, c0 = states[1].t, states[2].t
  local hn, cn = {}, {}
  local input = x
  for l = 0, self.num_layers - 1 do
    local outs = {}
    for d = 1, dirs do
      local k = l * dirs + d
      local sfx = "_l" .. l .. (d == 2 and "_reverse" or "")
      local out, h, c = R.direction(self.mode, d == 2, input, h0[k], c0 and c0[k], params_of(self, sfx))
      outs[d], hn[k], cn[k] = out, h, c
    end
    input = dirs == 2 and dle.cat(outs, 3) or outs[1]
    if self.dropout > 0 and l < self.num_layers - 1 then
      input = F.dropout(input, self.dropout, self.training)
    end
  end
  local out, h_n, c_n = input, dle.stack(hn, 1), lstm and dle.stack(cn, 1) or nil
  if not batched then
    out, h_n, c_n = out:squeeze(2), h_n:squeeze(2), c_n and c_n:squeeze(2)
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  if lstm then return out, h_n, c_n end
  return out, h_n
end

function RNNBase:extra_repr()
  local s = string.format("%d, %d", self.input_size, self.hidden_size)
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.dropout > 0 then s = s .. ", dropout=" .. self.dropout end
  if self.bidirectional then s = s .. ", bidirectional=true" end
  if self.proj_size > 0 then s = s .. ", proj_size=" .. self.proj_size end
  return s
end

M.RNN = RNNBase:extend("RNN")
--- dle.nn.RNN(input_size, hidden_size, {num_layers = 1, nonlinearity = "tanh"|"relu", bias = true,
-- batch_first = false, dropout = 0, bidirectional = false, dtype, generator}): Elman RNN,
-- h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh).
function M.RNN:init(input_size, hidden_size, opts)
  base_init(self, "RNN", "RNN", input_size, hidden_size, opts, {"nonlinearity"})
end

M.LSTM = RNNBase:extend("LSTM")
--- dle.nn.LSTM(input_size, hidden_size, {num_layers = 1, bias = true, batch_first = false,
-- dropout = 0, bidirectional = false, proj_size = 0, dtype, generator}).
function M.LSTM:init(input_size, hidden_size, opts)
  base_init(self, "LSTM", "LSTM", input_size, hidden_size, opts, {"proj_size"})
end

M.GRU = RNNBase:extend("GRU")
--- dle.nn.GRU(input_size, hidden_size, {num_layers = 1, bias = true, batch_first = false,
-- dropout = 0, bidirectional = false, dtype, generator}).
function M.GRU:init(input_size, hidden_size, opts)
  base_init(self, "GRU", "GRU", input_size, hidden_size, opts, {})
end

-- ---------------------------------------------------------------- cells

local CellBase = Module:extend("RNNCellBase")

local function cell_init(self, cls, mode, input_size, hidden_size, opts, extra)
  opts, mode = checked_opts(self, cls, mode, CELL_OPTS, extra, input_size, hidden_size, opts)
  if opts.bias ~= nil then check.boolean(opts.bias, cls, "bias") end
  self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, opts.bias ~= false
  add_params(self, "", R.GATES[mode] * hidden_size, input_size, hidden_size, opts)
end

--- forward(input, hx, cx): input {N, In} (or {In}); hx {N, H} (LSTMCell: {h, c} or h, c); nil
-- means zeros. @return h' (LSTMCell: h', c')
function CellBase:forward(x, hx, cx)
  local cls = self.__name
  check.tensor(x, cls, "input")
  if (x:dim() ~= 1 and x:dim() ~= 2) or x:size(-1) ~= self.input_size then
    check.error(string.format("%s: expected an input {N, %d} (or {%d}), got shape %s", cls, self.input_size,
                              self.input_size, shape_str(x)))
  end
  local w = self.weight_ih
  if x:dtype() ~= w:dtype() then
    check.error(string.format("%s: input is %s (shape %s) but the parameters are %s", cls, x:dtype(),
                              shape_str(x), w:dtype()))
  end
  hx, cx = initial_state(self, hx, cx)
  local batched = x:dim() == 2
  if not batched then x = x:unsqueeze(1) end
  local N = x:size(1)
  local function state(what, t)
    if not t then return dle.zeros(N, self.hidden_size, {dtype = x:dtype()}) end
    check_state(self, what, t, batched and {N, self.hidden_size} or {self.hidden_size}, x)
    return batched and t or t:unsqueeze(1)
  end
  local h, c = state("hx", hx), self.mode == "LSTM" and state("cx", cx) or nil
  local out, _, c_n = R.direction(self.mode, false, x:unsqueeze(1), h, c, params_of(self, ""))
  local h_n = out:select(1, 1)
  if not batched then h_n, c_n = h_n:squeeze(1), c_n and c_n:squeeze(1) end
  if self.mode == "LSTM" then return h_n, c_n end
  return h_n
end

function CellBase:extra_repr()
  return string.format("%d, %d%s", self.input_size, self.hidden_size, self.bias and "" or ", bias=false")
end

M.RNNCell = CellBase:extend("RNNCell")
--- dle.nn.RNNCell(input_size, hidden_size, {bias = true, nonlinearity = "tanh"|"relu", dtype, generator}).
function M.RNNCell:init(input_size, hidden_size, opts)
  cell_init(self, "RNNCell", "RNN", input_size, hidden_size, opts, {"nonlinearity"})
end

M.LSTMCell = CellBase:extend("LSTMCell")
--- dle.nn.LSTMCell(input_size, hidden_size, {bias = true, dtype, generator}).
function M.LSTMCell:init(input_size, hidden_size, opts)
  cell_init(self, "LSTMCell", "LSTM", input_size, hidden_size, opts, {})
end

M.GRUCell = CellBase:extend("GRUCell")
--- dle.nn.GRUCell(input_size, hidden_size, {bias = true, dtype, generator}).
function M.GRUCell:init(input_size, hidden_size, opts)
  cell_init(self, "GRUCell", "GRU", input_size, hidden_size, opts, {})
end

return M
