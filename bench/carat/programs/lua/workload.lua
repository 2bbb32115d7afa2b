-- The timed workload (not a test): binary trees (allocation and collection of many small
-- tables), then a word-frequency count over generated text (strings, concatenation, gsub,
-- hash-table growth), then a closure/coroutine pipeline. Deterministic; it checks its own
-- results and exits non-zero if one is wrong. The size is the first argument (default 16).

local depth = tonumber(arg and arg[1]) or 16

-- Binary trees (the Computer Language Benchmarks Game's shape).
local function bottom_up(d)
  if d == 0 then return {} end
  d = d - 1
  return {bottom_up(d), bottom_up(d)}
end
local function check(tree)
  if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
  return 1
end
local stretch = check(bottom_up(depth + 1))
assert(stretch == 2 ^ (depth + 2) - 1)
local long_lived = bottom_up(depth)
local total = 0
for d = 4, depth, 2 do
  local iters = 1 << (depth - d + 4)
  local c = 0
  for _ = 1, iters do c = c + check(bottom_up(d)) end
  assert(c == iters * (2 ^ (d + 1) - 1))
  total = total + c
end
assert(check(long_lived) == 2 ^ (depth + 1) - 1)

-- Word frequencies over generated text.
local syll = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu"}
local seed = 1
local function rnd(m) seed = (seed * 1103515245 + 12345) % 2147483648; return (seed >> 8) % m end
local lines = {}
for i = 1, 15000 do
  local ws = {}
  for j = 1, 8 do
    local w = {}
    for _ = 1, 1 + rnd(3) do w[#w + 1] = syll[1 + rnd(#syll)] end
    ws[j] = table.concat(w)
  end
  lines[i] = table.concat(ws, " ") .. "."
end
local text = table.concat(lines, "\n")
local freq, nwords = {}, 0
for w in text:gmatch("%a+") do freq[w] = (freq[w] or 0) + 1; nwords = nwords + 1 end
assert(nwords == #lines * 8)
local upper, nsub = text:gsub("(%a)(%a*)", function(a, b) return a:upper() .. b end)
assert(nsub == nwords and not upper:find("%f[%a]%l"))
local distinct, fsum = 0, 0
for _, c in pairs(freq) do distinct = distinct + 1; fsum = fsum + c end
assert(fsum == nwords and distinct <= 10 + 100 + 1000)

-- A coroutine pipeline of closures over the frequencies.
local keys = {}
for k in pairs(freq) do keys[#keys + 1] = k end
table.sort(keys)
local gen = coroutine.wrap(function()
  for round = 1, 30 do
    for _, k in ipairs(keys) do coroutine.yield(k, freq[k] * round) end
  end
end)
local acc = 0
for _, v in gen do acc = acc + v end
assert(acc == fsum * (30 * 31 // 2))
