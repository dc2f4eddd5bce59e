-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua). The functions are
-- written in Lua (lua/dle/io/) behind a wrapper that reports errors at the caller's line, so
-- their doc comments live here.

--- Saving and loading tensors and checkpoints: dle's own format, NumPy .npy and safetensors.
-- Written in Lua (lua/dle/io/; dle_format.lua describes the dle file layout). Writes are atomic
-- and crash-safe: a temporary file `<path>.tmp-<pid>` next to the target, flushed, fsync'ed and
-- renamed over the path, then the directory fsync'ed; an error removes the temporary file, and
-- the next save to a path removes the ones that killed processes left. A corrupt or truncated
-- file gives an error naming the function, the path and the problem. Tensors are written from
-- the CPU (a CUDA tensor is saved as CPU data) and load on the CPU. Safetensors headers are JSON
-- read and written by lua-cjson.
-- @module io.files

--- Saves a value (a tensor, or nested tables of tensors, numbers, strings, booleans) to a file.
-- dle's own format (version 2). Integers stay integers; table keys must be strings, numbers or
-- booleans. Aliasing is kept: tensors sharing a storage (tied weights, views such as narrow,
-- transpose, select, expand) are stored once (the span of the storage their views cover) and
-- load as views of one storage, each with its sizes and strides (offsets count from the start
-- of the stored span); one tensor reached twice loads as one tensor. A table reached twice
-- (without a cycle) is stored twice and loads as two equal tables. Functions, coroutines, other
-- userdata, tables with a metatable and cycles are errors naming the place
-- (`dle.save: value.model.fwd is a function`). requires_grad is kept.
-- The usual value is a checkpoint: model and optimizer state, step, RNG state.
-- @function dle.save
-- @param path string
-- @param value the value to store (not nil)
-- @usage dle.save("ckpt.dle", {model = net:state_dict(), opt = opt:state_dict(), step = 10,
--   rng = dle.get_rng_state()})

--- Loads a value written by dle.save (file versions 1 and 2); tensors come back on the CPU, with
-- the aliasing, sizes and strides they were saved with.
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
-- may have. Non-contiguous tensors are written contiguously. The format cannot express sharing:
-- tensors whose memory overlaps (tied weights, one tensor under two names, overlapping views)
-- are an error naming both, as in the safetensors library, unless opts.copy_shared is true,
-- which writes a copy of each (they load untied).
-- @function dle.save_safetensors
-- @param path string
-- @param tensors table name -> tensor
-- @param[opt] metadata table string -> string
-- @param[opt] opts {copy_shared = boolean}
-- @usage dle.save_safetensors("model.safetensors", net:state_dict())

--- Saves tensors and metadata as a GGUF v3 file (llama.cpp's format), atomically.
-- Tensors in name order: float32, float16, bfloat16 as F32/F16/BF16, quantized tensors
-- (dle.quantize) as their Q8_0/Q4_0/Q4_K blocks. Metadata values are typed by opts.types[key]
-- ("uint8" ... "float64", "bool", "string", "array<T>", as load_gguf's third result) or by their Lua
-- type (integer: int32 or int64, float: float32, boolean, string, list: array). general.alignment (a
-- uint32 power of two) sets the data alignment, 32 by default.
-- @function dle.save_gguf
-- @param path string
-- @param tensors table name -> tensor or quantized tensor
-- @param[opt] metadata table key -> value
-- @param[opt] opts {types = {key -> type name}}
-- @usage dle.save_gguf("m.gguf", {w = dle.quantize(w, "q8_0")}, {["general.architecture"] = "llama"})

--- Loads a GGUF v3 file: tensors (shapes in PyTorch order, GGUF's dims reversed; F32/F16/BF16 memory-mapped,
-- Q8_0/Q4_0/Q4_K as quantized tensors), metadata and the metadata's GGUF types.
-- @function dle.load_gguf
-- @param path string
-- @return tensors (name -> tensor), metadata (key -> value), types (key -> GGUF type name)

--- Loads a safetensors file: its tensors by name, and its metadata.
-- dtypes F32 F64 F16 BF16 I32 I64 U8 BOOL.
-- @function dle.load_safetensors
-- @param path string
-- @return table name -> tensor, and the "__metadata__" table (empty when absent)
