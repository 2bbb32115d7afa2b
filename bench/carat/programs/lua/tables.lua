-- Tables growing and shrinking: the array part, the hash part and their rehashes, with
-- results checked against closed forms.

-- Array part grown one element at a time, then read back.
local N = 200000
local a = {}
for i = 1, N do a[i] = i * 3 end
assert(#a == N)
local s = 0
for i = 1, N do s = s + a[i] end
assert(s == 3 * N * (N + 1) // 2)

-- Shrink from the end: the border follows.
for i = N, N // 2 + 1, -1 do a[i] = nil end
assert(#a == N // 2)
s = 0
for _, v in ipairs(a) do s = s + v end
local h = N // 2
assert(s == 3 * h * (h + 1) // 2)

-- Hash part: string keys inserted, half removed during traversal, then refilled.
local t = {}
for i = 1, 50000 do t["k" .. i] = i end
local count, sum = 0, 0
for k, v in pairs(t) do
  assert(k == "k" .. v)
  count = count + 1; sum = sum + v
end
assert(count == 50000 and sum == 50000 * 50001 // 2)
for k, v in pairs(t) do            -- clearing fields while traversing is allowed
  if v % 2 == 0 then t[k] = nil end
end
count, sum = 0, 0
for _, v in pairs(t) do count = count + 1; sum = sum + v end
assert(count == 25000 and sum == 25000 * 25000)    -- sum of the first 25000 odd numbers
for i = 2, 50000, 2 do t["k" .. i] = -i end        -- refill: a rehash on the way
sum = 0
for _, v in pairs(t) do sum = sum + v end
assert(sum == 25000 * 25000 - 2 * (25000 * 25001 // 2))

-- Mixed keys: integers, floats with integer value (normalised), floats, booleans, tables.
local m = {}
m[1] = "one"; m[2.0] = "two"; m[2.5] = "two and a half"
m[true] = "yes"; m[false] = "no"
local kt = {}
m[kt] = "table key"
assert(m[2] == "two" and m[1.0] == "one" and m[2.5] == "two and a half")
assert(m[true] == "yes" and m[false] == "no" and m[kt] == "table key")
assert(math.type(next({[3.0] = 1})) == "integer")
assert(m[-0.0] == nil); m[0] = "zero"; assert(m[-0.0] == "zero")

-- Many table keys: a table keyed by other tables, filled, looked up, emptied.
local keys, byobj = {}, {}
for i = 1, 20000 do keys[i] = {id = i}; byobj[keys[i]] = i end
for round = 1, 3 do
  s = 0
  for i = 1, 20000 do s = s + byobj[keys[i]] end
  assert(s == 20000 * 20001 // 2)
  collectgarbage()
end
for i = 1, 20000, 3 do byobj[keys[i]] = nil end
count = 0
for k, v in pairs(byobj) do assert(k.id == v); count = count + 1 end
assert(count == 20000 - 6667)

-- Sparse integer keys go to the hash part; the border of a non-sequence is any border.
local sp = {}
for i = 1, 1000 do sp[i * i] = i end
local c2 = 0
for k, v in pairs(sp) do assert(k == v * v); c2 = c2 + 1 end
assert(c2 == 1000)

-- table library: insert/remove in the middle, move, concat, unpack, sort.
local q = {}
for i = 1, 1000 do table.insert(q, 1, i) end         -- reversed
assert(q[1] == 1000 and q[1000] == 1)
for i = 1, 500 do assert(table.remove(q, 1) == 1001 - i) end
assert(#q == 500 and q[1] == 500)
table.insert(q, 250, "x"); assert(q[250] == "x" and #q == 501)
assert(table.remove(q, 250) == "x" and #q == 500)
local mv = table.move(q, 1, 500, 101, {})
assert(mv[101] == 500 and mv[600] == 1 and mv[100] == nil)
table.move(q, 1, 400, 2)                             -- overlapping, upwards
assert(q[2] == 500 and q[401] == 101 and q[1] == 500)
assert(table.concat({1, 2, 3, "a", 4.5}, ",") == "1,2,3,a,4.5")
assert(table.concat({}, "x") == "")
assert(table.concat({"a", "b", "c"}, "-", 2, 3) == "b-c")
assert(select("#", table.unpack({1, 2, nil, 4}, 1, 4)) == 4)
local x, y, z = table.unpack({10, 20, 30}, 2)
assert(x == 20 and y == 30 and z == nil)
local p = table.pack(1, nil, 3)
assert(p.n == 3 and p[3] == 3)

-- sort: a linear congruential sequence, checked sorted and a permutation of the input.
local seed = 12345
local function lcg() seed = (seed * 1103515245 + 12345) % 2147483648; return seed end
local r, orig = {}, {}
for i = 1, 30000 do r[i] = lcg() % 100000; orig[i] = r[i] end
table.sort(r)
for i = 2, #r do assert(r[i - 1] <= r[i]) end
local hist = {}
for _, v in ipairs(orig) do hist[v] = (hist[v] or 0) + 1 end
for _, v in ipairs(r) do hist[v] = hist[v] - 1 end
for _, c in pairs(hist) do assert(c == 0) end
table.sort(r, function(u, v) return u > v end)
for i = 2, #r do assert(r[i - 1] >= r[i]) end
local words = {}
for i = 1, 5000 do words[i] = string.format("w%05d", (i * 7919) % 5000) end
table.sort(words)
for i = 1, 5000 do assert(words[i] == string.format("w%05d", i - 1)) end

-- Repeated grow/shrink cycles of one table (rehash both ways), with a running checksum.
local cyc = {}
local check = 0
for round = 1, 20 do
  local n = 1000 * round
  for i = 1, n do cyc[i] = round; cyc["s" .. i] = i end
  for i = 1, n do check = check + cyc[i] + cyc["s" .. i] end
  for i = 1, n do cyc[i] = nil; cyc["s" .. i] = nil end
  assert(next(cyc) == nil)
end
local expect = 0
for round = 1, 20 do local n = 1000 * round; expect = expect + n * round + n * (n + 1) // 2 end
assert(check == expect)

-- Table constructors with many fields and trailing calls.
local function three() return 1, 2, 3 end
local tc = {three(), three()}
assert(#tc == 4 and tc[1] == 1 and tc[4] == 3)
local big = {}
local src = {"return {"}
for i = 1, 3000 do src[#src + 1] = i .. "," end
src[#src + 1] = "}"
big = load(table.concat(src))()
assert(#big == 3000 and big[3000] == 3000)
