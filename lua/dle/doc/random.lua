-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Random numbers (implemented in C, bindings/lua_random.c).
-- Every stream comes from a Philox generator: the default one (seeded by `dle.manual_seed`), or a
-- `dle.Generator` passed as the option `{generator = g}`. The same seed gives the same numbers
-- on every run, whatever the number of threads. A generator's state `{seed =, offset =}` is a
-- plain table that `dle.save` can store. `dle.default_generator` is the default generator.
-- @module tensor.random

--- Makes a new random generator, seeded with seed.
-- Without a seed it starts from dle's default seed, the one an unseeded default generator has (so
-- unseeded streams are reproducible too).
-- Pass it as `{generator = g}` to `dle.rand`, `randn`, `randint`, `randperm`, `bernoulli`, the
-- in-place fills, `nn.Dropout` and `data.DataLoader`. Its methods: `g:manual_seed(n)` (restarts
-- the stream, returns g), `g:initial_seed()`, `g:get_state()` -> `{seed, offset}`,
-- `g:set_state(s)` (continues exactly where the state was taken, returns g).
-- @function dle.Generator
-- @param[opt] seed integer
-- @return a dle.Generator
-- @usage local g = dle.Generator(42)
-- local a = dle.randn(3, {generator = g})

--- Tells whether v is a dle.Generator.
-- @function dle.is_generator
-- @param v any value
-- @treturn boolean

--- Reseeds the default generator with n: the same numbers follow on every run.
-- @function dle.manual_seed
-- @param n integer seed
-- @return the default generator (`dle.default_generator`)
-- @usage dle.manual_seed(0)

--- Returns the seed the default generator's stream started from.
-- @function dle.initial_seed
-- @treturn integer

--- Seeds the default generator with a fresh non-deterministic seed and returns that seed.
-- The seed comes from /dev/urandom (the clock when that fails); it is a non-negative integer.
-- @function dle.seed
-- @treturn integer the new seed

--- Returns the default generator's state as a table `{seed = int, offset = int}`.
-- Store it in a checkpoint (`dle.save`) and give it back to `dle.set_rng_state` to continue the
-- stream exactly.
-- @function dle.get_rng_state
-- @treturn table `{seed, offset}`

--- Makes the default generator resume from a state taken by `dle.get_rng_state`.
-- @function dle.set_rng_state
-- @param state table `{seed = int, offset = int}` (offset >= 0)

--- Returns a tensor of uniform random values in [0, 1).
-- Sizes as varargs or a table, then options `{dtype, generator, device, requires_grad}`; the
-- dtype must be a float type (float32 by default).
-- @function dle.rand
-- @param ... sizes, then an optional options table
-- @treturn dle.Tensor
-- @usage local u = dle.rand(2, 3, {generator = g})

--- Returns a tensor of standard normal random values (mean 0, standard deviation 1).
-- Sizes and options as for `dle.rand`.
-- @function dle.randn
-- @param ... sizes, then an optional options table
-- @treturn dle.Tensor
-- @usage local w = dle.randn(784, 128) * 0.01

--- Returns a tensor of random integers in [lo, hi): lo included, hi excluded.
-- `dle.randint(lo, hi, sizes..., opts)`, or `dle.randint(hi, sizes, opts)` with lo = 0. int64
-- unless `opts.dtype` says otherwise; the bounds must lie within +-2^53. The values are values, not
-- indices: class targets 1..10 are `dle.randint(1, 11, {n})`.
-- @function dle.randint
-- @param lo lowest value (or hi, in the short form)
-- @param hi bound, not included
-- @param ... sizes, then an optional options table `{dtype, generator, device}`
-- @treturn dle.Tensor
-- @usage local labels = dle.randint(1, 11, {32})   -- 1..10

--- Returns uniform random values in [0, 1) of t's shape, dtype and device (opts may change them).
-- The dtype must be a float type.
-- @function dle.rand_like
-- @tparam dle.Tensor t
-- @param[opt] opts `{dtype, device, generator, requires_grad}`
-- @treturn dle.Tensor

--- Returns standard normal random values of t's shape, dtype and device (opts may change them).
-- The dtype must be a float type.
-- @function dle.randn_like
-- @tparam dle.Tensor t
-- @param[opt] opts `{dtype, device, generator, requires_grad}`
-- @treturn dle.Tensor

--- Returns random integers in [lo, hi) of t's shape, in t's dtype unless opts says otherwise.
-- `dle.randint_like(t, hi, opts)` takes lo = 0.
-- @function dle.randint_like
-- @tparam dle.Tensor t
-- @param lo lowest value (or hi when only one number is given)
-- @param[opt] hi bound, not included
-- @param[opt] opts `{dtype, device, generator}`
-- @treturn dle.Tensor

--- Returns a random permutation of 1..n (int64 unless opts.dtype says otherwise).
-- The values are 1-based, unlike PyTorch's 0..n-1, because their use is indexing from Lua
-- (`index_select`, `gather`). Fisher-Yates driven by the generator.
-- @function dle.randperm
-- @param n integer
-- @param[opt] opts `{dtype, generator, device}`
-- @treturn dle.Tensor 1-D
-- @usage local shuffled = x:index_select(1, dle.randperm(x:size(1)))

--- Draws 0/1 values, 1 with probability p: per element of a tensor p, or one p for all.
-- `dle.bernoulli(p_tensor, opts)` gives p's shape and dtype (p a float tensor of probabilities);
-- `dle.bernoulli(p_number, sizes..., opts)` gives float32 unless `opts.dtype`. The method form is
-- `p:bernoulli(opts)`. Options `{dtype, generator, device}`.
-- @function dle.bernoulli
-- @param p float tensor or number in [0, 1]
-- @param ... sizes when p is a number, then an optional options table
-- @treturn dle.Tensor
-- @usage local mask = dle.bernoulli(0.9, 4, 4)

--- Fills t in place with 1 with probability p, else 0, and returns t.
-- p is a number (default 0.5) or a float tensor broadcastable to t; any dtype of t.
-- @function Tensor:bernoulli_
-- @param[opt] p number or float tensor (default 0.5)
-- @param[opt] opts `{generator}`
-- @treturn dle.Tensor t

--- Fills a float tensor in place with uniform random values in [a, b) and returns it.
-- a and b default to 0 and 1 (both or neither); any layout of t. In float16/bfloat16 the scaled
-- values may round up to b.
-- @function Tensor:uniform_
-- @param[opt] a lower bound (default 0)
-- @param[opt] b upper bound (default 1)
-- @param[opt] opts `{generator}`
-- @treturn dle.Tensor t
-- @usage local w = dle.empty(256, 784):uniform_(-0.05, 0.05)

--- Fills a float tensor in place with normal random values and returns it.
-- @function Tensor:normal_
-- @param[opt] mean default 0
-- @param[opt] std default 1 (>= 0)
-- @param[opt] opts `{generator}`
-- @treturn dle.Tensor t

--- Fills t in place with random integers in [lo, hi) (lo = 0 when only hi is given) and returns t.
-- Any dtype whose values hold that range exactly (float tensors get integral values).
-- @function Tensor:random_
-- @param lo lowest value (or hi when only one number is given)
-- @param[opt] hi bound, not included
-- @param[opt] opts `{generator}`
-- @treturn dle.Tensor t
