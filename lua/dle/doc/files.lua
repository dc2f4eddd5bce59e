-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua). The functions are
-- written in Lua (lua/dle/io.lua) behind a wrapper that reports errors at the caller's line, so
-- their doc comments live here.

--- Saving and loading tensors and checkpoints: dle's own format, NumPy .npy and safetensors.
-- Written in Lua (lua/dle/io.lua, which also describes the dle file layout). Writes are atomic
-- (a temporary file, flushed, fsync'ed and renamed over the path); a corrupt or truncated file
-- gives an error naming the function, the path and the problem. Tensors are written contiguous
-- from the CPU (a CUDA tensor is saved as CPU data) and load on the CPU.
-- @module io.files

--- Saves a value (a tensor, or nested tables of tensors, numbers, strings, booleans) to a file.
-- dle's own format. Integers stay integers; table keys must be strings, numbers or booleans;
-- cycles and functions are errors naming the key path. A tensor reached twice is stored twice;
-- requires_grad is kept.
-- The usual value is a checkpoint: model and optimizer state, step, RNG state.
-- @function dle.save
-- @param path string
-- @param value the value to store (not nil)
-- @usage dle.save("ckpt.dle", {model = net:state_dict(), opt = opt:state_dict(), step = 10,
--   rng = dle.get_rng_state()})

--- Loads a value written by dle.save (tensors come back on the CPU, contiguous).
-- Errors name the path and the problem: bad magic, unsupported version, truncated description
-- or data, bad dtype.
-- @function dle.load
-- @param path string
-- @return the saved value
-- @usage local ckpt = dle.load("ckpt.dle"); net:load_state_dict(ckpt.model)

--- Saves a tensor as a NumPy .npy file (format 1.0, C order, little-endian).
-- bfloat16 has no NumPy dtype: it is saved as float32 (NumPy's f4), which holds it exactly.
-- @function dle.save_npy
-- @param path string
-- @tparam dle.Tensor t

--- Loads a NumPy .npy file (format 1.0, 2.0 or 3.0) as a tensor.
-- dtypes f4 f8 f2 i4 i8 u1 b1, either byte order; a fortran_order array comes back as a
-- contiguous C-order tensor; at most 8 dims.
-- @function dle.load_npy
-- @param path string
-- @treturn dle.Tensor

--- Saves a table of named tensors in the safetensors format.
-- Names are sorted, so the file is deterministic; the JSON header is padded with spaces to a
-- multiple of 8 bytes. metadata (string -> string) is stored as "__metadata__", a name no tensor
-- may have.
-- @function dle.save_safetensors
-- @param path string
-- @param tensors table name -> tensor
-- @param[opt] metadata table string -> string
-- @usage dle.save_safetensors("model.safetensors", net:state_dict())

--- Loads a safetensors file: its tensors by name, and its metadata.
-- dtypes F32 F64 F16 BF16 I32 I64 U8 BOOL.
-- @function dle.load_safetensors
-- @param path string
-- @return table name -> tensor, and the "__metadata__" table (empty when absent)
