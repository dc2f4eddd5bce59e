-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Views: tensors that share storage with their source (implemented in C, bindings/lua_tensor.c).
-- A view changes sizes, strides and offset, never data: writing through a view writes the source
-- (check with `dle.same_storage`). Dims and indices are 1-based; -1 is the last. `t[i]` selects
-- along dim 1 (a number for a 1-D tensor) and `t[i] = v` writes that slice. Views are
-- differentiable. Joining and splitting (`dle.cat`, `t:split`, ...) are in tensor.indexing.
-- @module tensor.views

--- Returns a view of t with new sizes and the same elements in row-major order.
-- Sizes as varargs or a table; one of them may be -1 (inferred). `t:view_as(other)` takes
-- other's sizes. The strides of t must allow the view without a copy (a transposed tensor often
-- does not): then the error says to use `reshape`.
-- @function Tensor:view
-- @param ... sizes, or a table of sizes (or a tensor, for view_as)
-- @treturn dle.Tensor a view
-- @usage local m = dle.arange(6):view(2, -1)   -- 2x3

--- Returns t with new sizes: a view when the strides allow one, else a contiguous copy.
-- Sizes as varargs or a table; one may be -1. Also `dle.reshape(t, ...)`.
-- @function Tensor:reshape
-- @param ... sizes, or a table of sizes
-- @treturn dle.Tensor
-- @usage local v = dle.arange(6):view(2, 3):t():reshape(6)   -- a copy: 0 3 1 4 2 5

--- Returns a view of t with dims d1 and d2 swapped. Also `dle.transpose(t, d1, d2)`.
-- @function Tensor:transpose
-- @param d1 dim (1-based, negative from the end)
-- @param d2 dim
-- @treturn dle.Tensor a view
-- @usage dle.zeros(2, 3, 4):transpose(1, -1):shape()   --> {4, 3, 2}

--- Returns the transpose of a matrix as a view (for 0 or 1 dims: a view with the same shape).
-- A tensor with more than 2 dims is an error: use `transpose(d1, d2)`.
-- @function Tensor:t
-- @treturn dle.Tensor a view

--- Returns a view of t with its dims reordered: dim i of the result is dim dims[i] of t.
-- The dims as varargs or a table, one per dim of t. Also `dle.permute(t, ...)`.
-- @function Tensor:permute
-- @param ... dims (1-based)
-- @treturn dle.Tensor a view
-- @usage dle.zeros(2, 3, 4):permute(3, 1, 2):shape()   --> {4, 2, 3}

--- Returns a view of len elements of dim d starting at index start.
-- start is 1-based (negative counts from the end). Also `dle.narrow(t, d, start, len)`.
-- @function Tensor:narrow
-- @param d dim
-- @param start first index kept
-- @param len number of elements
-- @treturn dle.Tensor a view with dim d of size len
-- @usage dle.arange(6):view(2, 3):narrow(2, 2, 2)   -- columns 2 and 3

--- Returns the slice at index i of dim d as a view, without dim d.
-- i is 1-based (negative from the end); `t[i]` is `t:select(1, i)`. Also `dle.select(t, d, i)`.
-- @function Tensor:select
-- @param d dim
-- @param i index
-- @treturn dle.Tensor a view with one dim less
-- @usage dle.arange(6):view(2, 3):select(2, 1)   -- first column: 0 3

--- Returns a view of t broadcast to larger sizes (stride 0 along the expanded dims).
-- Only dims of size 1 can grow, and new dims may be added in front; -1 keeps a size.
-- `t:expand_as(other)` takes other's sizes. The result shares one element among many places:
-- write to a `clone()` of it, not to it.
-- @function Tensor:expand
-- @param ... sizes, or a table of sizes (or a tensor, for expand_as)
-- @treturn dle.Tensor a view
-- @usage dle.ones(1, 3):expand(4, -1):shape()   --> {4, 3}

--- Returns a view of t without dims of size 1: all of them, or only dim d.
-- With d given and dim d not of size 1, t's shape is kept. Also `dle.squeeze(t, d)`.
-- @function Tensor:squeeze
-- @param[opt] d dim
-- @treturn dle.Tensor a view

--- Returns a view of t with a new dim of size 1 at position d.
-- d may be one past the last dim (or -1: the new dim comes last). Also `dle.unsqueeze(t, d)`.
-- @function Tensor:unsqueeze
-- @param d position of the new dim in the result
-- @treturn dle.Tensor a view
-- @usage dle.zeros(2, 3):unsqueeze(1):shape()   --> {1, 2, 3}

--- Merges dims d1 to d2 (default: all, 1 to -1) into one.
-- A view when the strides allow it, else a copy (as reshape). Also `dle.flatten(t, d1, d2)`.
-- @function Tensor:flatten
-- @param[opt] d1 first dim (default 1)
-- @param[opt] d2 last dim (default -1)
-- @treturn dle.Tensor
-- @usage dle.zeros(2, 3, 4):flatten(2):shape()   --> {2, 12}

--- Returns t itself when it is contiguous, else a contiguous copy.
-- @function Tensor:contiguous
-- @treturn dle.Tensor
