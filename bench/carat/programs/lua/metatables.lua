-- Metatables: inheritance through __index chains, __newindex proxies, arithmetic and
-- comparison metamethods on a rational-number type, __concat/__len/__call/__close/
-- __tostring/__name, rawget/rawset/rawequal/rawlen.

-- Rationals, normalised, with metamethods.
local Q = {}
Q.__index = Q
local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return math.abs(a) end
local function q(n, d)
  d = d or 1
  if d < 0 then n, d = -n, -d end
  local g = gcd(n, d)
  return setmetatable({n = n // g, d = d // g}, Q)
end
local function lift(x) if getmetatable(x) == Q then return x end return q(x, 1) end
Q.__add = function(a, b) a, b = lift(a), lift(b); return q(a.n * b.d + b.n * a.d, a.d * b.d) end
Q.__sub = function(a, b) a, b = lift(a), lift(b); return q(a.n * b.d - b.n * a.d, a.d * b.d) end
Q.__mul = function(a, b) a, b = lift(a), lift(b); return q(a.n * b.n, a.d * b.d) end
Q.__div = function(a, b) a, b = lift(a), lift(b); return q(a.n * b.d, a.d * b.n) end
Q.__unm = function(a) return q(-a.n, a.d) end
Q.__eq = function(a, b) return a.n == b.n and a.d == b.d end
Q.__lt = function(a, b) a, b = lift(a), lift(b); return a.n * b.d < b.n * a.d end
Q.__le = function(a, b) a, b = lift(a), lift(b); return a.n * b.d <= b.n * a.d end
Q.__tostring = function(a) if a.d == 1 then return tostring(a.n) end return a.n .. "/" .. a.d end
Q.__concat = function(a, b) return tostring(a) .. tostring(b) end
Q.__name = "rational"

-- Harmonic number H(20) exactly: 55835135/15519504.
local h = q(0)
for i = 1, 20 do h = h + q(1, i) end
assert(h.n == 55835135 and h.d == 15519504)
assert(tostring(h) == "55835135/15519504")
assert(q(1, 2) + q(1, 3) == q(5, 6) and q(1, 2) ~= q(1, 3))
assert(q(1, 3) < q(1, 2) and q(1, 2) <= q(2, 4) and not (q(1, 2) < q(1, 2)))
assert(-q(3, 4) == q(-3, 4) and q(3, 4) * 4 == q(3) and 2 / q(4) == q(1, 2))
assert("x=" .. q(1, 2) == "x=1/2" and q(2, 4) .. "!" == "1/2!")
local rs = {}
for i = 1, 200 do rs[i] = q((i * 37) % 101, (i % 13) + 1) end
table.sort(rs)                                      -- sort through __lt
for i = 2, #rs do assert(rs[i - 1] <= rs[i]) end
-- Sum of 1/(k(k+1)) for k = 1..n telescopes to n/(n+1).
local tel = q(0)
for k = 1, 300 do tel = tel + q(1, k * (k + 1)) end
assert(tel == q(300, 301))

-- Inheritance: a class chain four deep, methods resolved through __index tables.
local Base = {}; Base.__index = Base
function Base.new(cls, x) return setmetatable({x = x}, cls) end
function Base:value() return self.x end
function Base:kind() return "base" end
local function subclass(parent, kind, mult)
  local c = setmetatable({}, {__index = parent})
  c.__index = c
  c.kind = function() return kind end
  c.value = function(self) return parent.value(self) * mult end
  return c
end
local A = subclass(Base, "a", 2)
local B = subclass(A, "b", 3)
local C = subclass(B, "c", 5)
local objs = {}
for i = 1, 4000 do
  local cls = ({Base, A, B, C})[i % 4 + 1]
  objs[i] = cls:new(i)
end
local s = 0
local kinds = {}
for _, o in ipairs(objs) do
  s = s + o:value()
  kinds[o:kind()] = (kinds[o:kind()] or 0) + 1
end
-- i%4: 0 -> Base (x1), 1 -> A (x2), 2 -> B (x6), 3 -> C (x30)
local expect = 0
for i = 1, 4000 do expect = expect + i * ({1, 2, 6, 30})[i % 4 + 1] end
assert(s == expect and kinds.base == 1000 and kinds.c == 1000)

-- __index and __newindex functions: a read-only proxy and a default-valued table.
local function readonly(t)
  return setmetatable({}, {
    __index = t,
    __newindex = function() error("read-only table", 2) end,
    __len = function() return #t end,
    __pairs = function() return next, t, nil end,
  })
end
local ro = readonly({10, 20, 30})
assert(ro[2] == 20 and #ro == 3)
local okw, errw = pcall(function() ro[1] = 5 end)
assert(not okw and errw:find("read%-only table"))
local psum = 0
for _, v in pairs(ro) do psum = psum + v end
assert(psum == 60 and rawlen(ro) == 0 and rawget(ro, 1) == nil)
local defaults = setmetatable({}, {__index = function(t, k) local v = k * k; rawset(t, k, v); return v end})
s = 0
for i = 1, 1000 do s = s + defaults[i] end
for i = 1, 1000 do s = s + rawget(defaults, i) end
assert(s == 2 * (1000 * 1001 * 2001 // 6))
-- __newindex to a table: writes go elsewhere.
local store = {}
local redirect = setmetatable({}, {__newindex = store})
redirect.a = 1
assert(rawget(redirect, "a") == nil and store.a == 1)

-- __call, __len, __unm on a callable object, and __index on strings (the string library).
local callable = setmetatable({calls = 0}, {__call = function(self, a, b)
  self.calls = self.calls + 1; return a * b end})
for i = 1, 100 do assert(callable(i, 2) == 2 * i) end
assert(callable.calls == 100)
assert(("abc"):len() == 3 and getmetatable("").__index == string)

-- __eq is not called for identical or rawequal objects; rawequal ignores __eq.
local eqcalls = 0
local E = {__eq = function() eqcalls = eqcalls + 1; return true end}
local e1, e2 = setmetatable({}, E), setmetatable({}, E)
assert(e1 == e2 and eqcalls == 1 and not rawequal(e1, e2) and e1 == e1 and eqcalls == 1)

-- Integer-division, modulo, power, bitwise and idiv metamethods.
local V = {}
V.__index = V
local function vec(x, y) return setmetatable({x = x, y = y}, V) end
V.__idiv = function(a, k) return vec(a.x // k, a.y // k) end
V.__mod = function(a, k) return vec(a.x % k, a.y % k) end
V.__pow = function(a, k) return vec(a.x ^ k, a.y ^ k) end
V.__band = function(a, k) return vec(a.x & k, a.y & k) end
V.__shl = function(a, k) return vec(a.x << k, a.y << k) end
V.__bnot = function(a) return vec(~a.x, ~a.y) end
local w = vec(17, -9)
local r = w // 4; assert(r.x == 4 and r.y == -3)
r = w % 4; assert(r.x == 1 and r.y == 3)
r = w ^ 2; assert(r.x == 289.0 and r.y == 81.0)
r = w & 6; assert(r.x == 0 and r.y == 6)
r = w << 2; assert(r.x == 68 and r.y == -36)
r = ~w; assert(r.x == -18 and r.y == 8)

-- To-be-closed variables: closed in reverse order, on normal exit and on error.
local log = {}
local function closer(name) return setmetatable({}, {__close = function(_, err)
  log[#log + 1] = name .. (err and ":err" or "") end}) end
do
  local a <close> = closer("a")
  local b <close> = closer("b")
  local c <const> = 3
  assert(c == 3)
end
assert(table.concat(log, ",") == "b,a")
log = {}
local okc = pcall(function()
  local x <close> = closer("x")
  local y <close> = closer("y")
  error("boom")
end)
assert(not okc and table.concat(log, ",") == "y:err,x:err")
log = {}
for _ in function(_, i) i = (i or 0) + 1; if i <= 3 then return i end end, nil, nil, closer("loop") do end
assert(log[1] == "loop")

-- Metatable protection and __name in error messages.
local prot = setmetatable({}, {__metatable = "locked"})
assert(getmetatable(prot) == "locked" and not pcall(setmetatable, prot, {}))
local okn, errn = pcall(function() return q(1) + {} end)
assert(not okn)
local okx, errx = pcall(function() return #setmetatable({}, {__name = "MyType"}) .. nil end)
assert(not okx and errx:find("concatenate"))
