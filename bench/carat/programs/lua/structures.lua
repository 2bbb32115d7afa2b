-- Pointer-heavy data structures built from tables: linked lists, a binary search tree with
-- deletions, a binary heap, a graph with BFS/Dijkstra, a serializer and parser round trip,
-- each checked against properties or values computed another way.

local seed = 7
local function rnd(m) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % m end

-- Doubly linked list: insert, remove every third, reverse, checksum both directions.
local head = {}
head.next, head.prev = head, head
local function push(v) local n = {v = v, prev = head.prev, next = head}; head.prev.next = n; head.prev = n end
for i = 1, 30000 do push(i) end
local i, node = 0, head.next
while node ~= head do
  i = i + 1
  local nxt = node.next
  if i % 3 == 0 then node.prev.next = node.next; node.next.prev = node.prev end
  node = nxt
end
local fwd, bwd, cnt = 0, 0, 0
node = head.next
while node ~= head do fwd = fwd + node.v; cnt = cnt + 1; node = node.next end
node = head.prev
while node ~= head do bwd = bwd + node.v; node = node.prev end
assert(cnt == 20000 and fwd == bwd and fwd == 30000 * 30001 // 2 - 3 * (10000 * 10001 // 2))

-- Binary search tree: random inserts, deletions, in-order traversal sorted and complete.
local function insert(root, k)
  if not root then return {k = k} end
  if k < root.k then root.l = insert(root.l, k) elseif k > root.k then root.r = insert(root.r, k) end
  return root
end
local function minnode(n) while n.l do n = n.l end return n end
local function delete(root, k)
  if not root then return nil end
  if k < root.k then root.l = delete(root.l, k)
  elseif k > root.k then root.r = delete(root.r, k)
  else
    if not root.l then return root.r end
    if not root.r then return root.l end
    local m = minnode(root.r)
    root.k = m.k
    root.r = delete(root.r, m.k)
  end
  return root
end
local root
local present = {}
for _ = 1, 20000 do local k = rnd(50000); root = insert(root, k); present[k] = true end
for _ = 1, 8000 do local k = rnd(50000); root = delete(root, k); present[k] = nil end
local out = {}
local function inorder(n) if n then inorder(n.l); out[#out + 1] = n.k; inorder(n.r) end end
inorder(root)
local npresent = 0
for _ in pairs(present) do npresent = npresent + 1 end
assert(#out == npresent)
for j = 2, #out do assert(out[j - 1] < out[j]) end
for _, k in ipairs(out) do assert(present[k]) end

-- Binary heap: heapsort of random numbers equals table.sort.
local heap = {}
local function hpush(v)
  heap[#heap + 1] = v
  local j = #heap
  while j > 1 do
    local p = j // 2
    if heap[p] <= heap[j] then break end
    heap[p], heap[j] = heap[j], heap[p]; j = p
  end
end
local function hpop()
  local top, last = heap[1], table.remove(heap)
  if #heap > 0 then
    heap[1] = last
    local j = 1
    while true do
      local l, r, m = 2 * j, 2 * j + 1, j
      if l <= #heap and heap[l] < heap[m] then m = l end
      if r <= #heap and heap[r] < heap[m] then m = r end
      if m == j then break end
      heap[m], heap[j] = heap[j], heap[m]; j = m
    end
  end
  return top
end
local data = {}
for j = 1, 20000 do data[j] = rnd(1000000); hpush(data[j]) end
table.sort(data)
for j = 1, 20000 do assert(hpop() == data[j]) end
assert(#heap == 0)

-- Graph: a grid with weighted edges; Dijkstra with the heap vs Bellman-Ford relaxation.
local W, H = 40, 40
local function id(x, y) return (y - 1) * W + x end
local adj = {}
for y = 1, H do for x = 1, W do
  local e = {}
  if x < W then e[#e + 1] = {id(x + 1, y), 1 + (x * 7 + y * 3) % 9} end
  if x > 1 then e[#e + 1] = {id(x - 1, y), 1 + (x * 5 + y) % 9} end
  if y < H then e[#e + 1] = {id(x, y + 1), 1 + (x + y * 11) % 9} end
  if y > 1 then e[#e + 1] = {id(x, y - 1), 1 + (x * 3 + y * 2) % 9} end
  adj[id(x, y)] = e
end end
local N = W * H
local dist = {}
for v = 1, N do dist[v] = math.huge end
dist[1] = 0
heap = {}
local function hpush2(d, v) hpush({d, v}) end
local mtp = {__lt = function(a, b) return a[1] < b[1] end, __le = function(a, b) return a[1] <= b[1] end}
local _hpush = hpush
hpush = function(e) _hpush(setmetatable(e, mtp)) end
hpush2(0, 1)
while #heap > 0 do
  local top = hpop()
  local d, u = top[1], top[2]
  if d == dist[u] then
    for _, ed in ipairs(adj[u]) do
      local v, w = ed[1], ed[2]
      if d + w < dist[v] then dist[v] = d + w; hpush2(dist[v], v) end
    end
  end
end
local bf = {}
for v = 1, N do bf[v] = math.huge end
bf[1] = 0
local changed = true
while changed do
  changed = false
  for u = 1, N do
    if bf[u] < math.huge then
      for _, ed in ipairs(adj[u]) do
        if bf[u] + ed[2] < bf[ed[1]] then bf[ed[1]] = bf[u] + ed[2]; changed = true end
      end
    end
  end
end
for v = 1, N do assert(dist[v] == bf[v]) end

-- Serializer and parser: a nested structure to text and back, compared deeply.
local function gen(depth)
  if depth == 0 then
    local r = rnd(4)
    if r == 0 then return rnd(100000) elseif r == 1 then return "s" .. rnd(1000)
    elseif r == 2 then return rnd(2) == 1 else return rnd(1000) / 8 end
  end
  local t = {}
  for j = 1, 1 + rnd(5) do t[j] = gen(depth - 1) end
  for j = 1, rnd(3) do t["k" .. j] = gen(depth - 1) end
  return t
end
local function ser(v, buf)
  local ty = type(v)
  if ty == "table" then
    buf[#buf + 1] = "{"
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == "number"
    end)
    for _, k in ipairs(keys) do
      buf[#buf + 1] = "["; ser(k, buf); buf[#buf + 1] = "]="; ser(v[k], buf); buf[#buf + 1] = ","
    end
    buf[#buf + 1] = "}"
  elseif ty == "string" then buf[#buf + 1] = ("%q"):format(v)
  elseif ty == "number" then buf[#buf + 1] = math.type(v) == "integer" and ("%d"):format(v) or ("%a"):format(v)
  else buf[#buf + 1] = tostring(v) end
  return buf
end
local function deq(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b and math.type(a) == math.type(b) end
  for k, v in pairs(a) do if not deq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
for _ = 1, 30 do
  local v = gen(5)
  local text = table.concat(ser(v, {}))
  local back = load("return " .. text)()
  assert(deq(v, back))
  assert(table.concat(ser(back, {})) == text)
end

-- A string-keyed hash map implemented in Lua (open addressing over an array), checked
-- against a native table under inserts and deletes.
local Map = {}
Map.__index = Map
local function newmap() return setmetatable({cap = 8, n = 0, keys = {}, vals = {}}, Map) end
local function strhash(s) local hv = 5381; for j = 1, #s do hv = (hv * 33 + s:byte(j)) & 0x7fffffff end return hv end
local TOMB = {}
function Map:find(k)
  local j = strhash(k) % self.cap + 1
  while true do
    local kk = self.keys[j]
    if kk == nil or kk == k then return j end
    j = j % self.cap + 1
  end
end
function Map:grow()
  local ok, ov = self.keys, self.vals
  self.cap, self.keys, self.vals, self.n = self.cap * 2, {}, {}, 0
  for j, k in pairs(ok) do if k ~= TOMB then self:set(k, ov[j]) end end
end
function Map:set(k, v)
  if (self.n + 1) * 2 > self.cap then self:grow() end
  local j = self:find(k)
  if self.keys[j] == nil then self.n = self.n + 1 end
  self.keys[j], self.vals[j] = k, v
end
function Map:get(k) local j = self:find(k); if self.keys[j] == k then return self.vals[j] end end
function Map:del(k) local j = self:find(k); if self.keys[j] == k then self.keys[j] = TOMB; self.vals[j] = nil end end
local mp, ref = newmap(), {}
for j = 1, 20000 do
  local k = "key" .. rnd(5000)
  local op = rnd(3)
  if op < 2 then mp:set(k, j); ref[k] = j else mp:del(k); ref[k] = nil end
end
for j = 0, 4999 do local k = "key" .. j; assert(mp:get(k) == ref[k]) end
