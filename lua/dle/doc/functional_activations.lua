-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua). These functions of
-- dle.nn.functional are made in a loop (lua/dle/nn/functional.lua), so their doc comments live
-- here.

--- The activations of dle.nn.functional.
-- Each checks that its input is a tensor (an error naming the function otherwise) and calls the
-- tensor op of the same name.
-- @module nn.functional.activations

--- Returns relu(x) = max(x, 0) elementwise, in x's dtype (the op `dle.relu`).
-- @function dle.nn.functional.relu
-- @tparam dle.Tensor x
-- @treturn dle.Tensor of x's shape
-- @usage local h = F.relu(F.linear(x, w, b))

--- Returns the GELU activation x * Phi(x) elementwise, exact erf form (the op `dle.gelu`).
-- @function dle.nn.functional.gelu
-- @tparam dle.Tensor x
-- @treturn dle.Tensor of x's shape

--- Returns silu(x) = x * sigmoid(x) elementwise (the op `dle.silu`).
-- @function dle.nn.functional.silu
-- @tparam dle.Tensor x
-- @treturn dle.Tensor of x's shape

--- Returns tanh(x) elementwise (the op `dle.tanh`).
-- @function dle.nn.functional.tanh
-- @tparam dle.Tensor x
-- @treturn dle.Tensor of x's shape

--- Returns sigmoid(x) = 1 / (1 + exp(-x)) elementwise (the op `dle.sigmoid`).
-- @function dle.nn.functional.sigmoid
-- @tparam dle.Tensor x
-- @treturn dle.Tensor of x's shape

--- Returns softmax(x) along dim d (default -1, the last), the op `dle.softmax`.
-- @function dle.nn.functional.softmax
-- @tparam dle.Tensor x
-- @param[opt] d dim (default -1)
-- @treturn dle.Tensor of x's shape

--- Returns log(softmax(x)) along dim d (default -1), computed stably (the op `dle.log_softmax`).
-- @function dle.nn.functional.log_softmax
-- @tparam dle.Tensor x
-- @param[opt] d dim (default -1)
-- @treturn dle.Tensor of x's shape
