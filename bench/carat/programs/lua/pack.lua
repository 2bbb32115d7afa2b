-- string.pack / string.unpack / string.packsize: byte layouts checked against bytes
-- written out by hand (and by Python's struct module), round trips of many values,
-- alignment, strings with length prefixes and zero terminators, and errors.

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

-- Fixed layouts.
assert(hex(string.pack("<i4", 1)) == "01000000")
assert(hex(string.pack(">i4", 1)) == "00000001")
assert(hex(string.pack("<i2>i2", -2, -2)) == "feffff" .. "fe")
assert(hex(string.pack("<I3", 0x123456)) == "563412")
assert(hex(string.pack(">j", math.mininteger)) == "8000000000000000")
assert(hex(string.pack("<d", 1.5)) == "000000000000f83f")
assert(hex(string.pack(">f", -2.25)) == "c0100000")
assert(hex(string.pack("<n", 0.1)) == "9a9999999999b93f")
assert(hex(string.pack("<i16", -1)) == ("ff"):rep(16))
assert(hex(string.pack("<I16", 1)) == "01" .. ("00"):rep(15))
assert(hex(string.pack("B b", 255, -128)) == "ff80")
assert(hex(string.pack("z", "hi")) == "686900")
assert(hex(string.pack("<s2", "abc")) == "0300616263")
assert(hex(string.pack("c5", "ab")) == "6162000000")
assert(hex(string.pack("<!4 b i4", 1, 2)) == "01000000" .. "02000000")
assert(hex(string.pack("<!8 b d", 1, 0.0)) == "01" .. ("00"):rep(7) .. ("00"):rep(8))
assert(hex(string.pack("<!4 b Xi4 b", 1, 2)) == "01000000" .. "02")
assert(hex(string.pack("<i2 x i2", 1, 2)) == "0100" .. "00" .. "0200")

-- packsize.
assert(string.packsize("i4 i8 d") == 20)
assert(string.packsize("!8 i1 i8") == 16)
assert(string.packsize("c10 b h") == 13)
assert(string.packsize("<!4 i2 i4") == 8 and not pcall(string.packsize, "!4 i3"))
assert(not pcall(string.packsize, "s"))          -- variable size
assert(not pcall(string.packsize, "z"))

-- unpack: values and the next position.
local a, b, c, pos = string.unpack("<i4 >i2 z", "\1\0\0\0\0\5hello\0tail")
assert(a == 1 and b == 5 and c == "hello" and pos == 13)
local s1, s2, p2 = string.unpack("s1 s1", "\3abc\0")
assert(s1 == "abc" and s2 == "" and p2 == 6)
assert(string.unpack("<i8", ("\xff"):rep(8)) == -1)
assert(string.unpack("<I8", ("\xff"):rep(8)) == -1)    -- wraps to the same integer
assert(string.unpack("<I4", "\xff\xff\xff\xff") == 4294967295)
assert(string.unpack("<i3", "\xff\xff\x7f") == 0x7fffff)
assert(string.unpack("<i3", "\x00\x00\x80") == -0x800000)
assert(string.unpack("<d", string.pack("<d", math.pi)) == math.pi)
assert(select(2, string.unpack("<i2", "\0\0\0\0", 3)) == 5)
assert(string.unpack("<i2", "abcd", -2) == string.unpack("<i2", "cd"))
assert(not pcall(string.unpack, "<i4", "abc"))          -- data string too short
assert(not pcall(string.unpack, "<i9", ("\0"):rep(8) .. "\1"))  -- does not fit
assert(string.unpack("<i9", ("\xff"):rep(9)) == -1)
assert(not pcall(string.pack, "i17", 1))
assert(not pcall(string.pack, "b", 200))                -- overflow
assert(not pcall(string.pack, "z", "a\0b"))

-- Round trips: 20000 records of mixed fields, packed into one buffer and read back.
local fmt = "<i4 I2 d s2 b z"
local parts, recs = {}, {}
local seed = 42
local function rnd(m) seed = (seed * 6364136223846793005 + 1442695040888963407); return (seed >> 33) % m end
for i = 1, 20000 do
  local r = {rnd(2^31) - 2^30 // 1, rnd(65536), rnd(1000000) / 1024, ("x"):rep(rnd(20)) .. i,
             rnd(256) - 128, "n" .. rnd(1000)}
  r[1] = math.tointeger(r[1])
  recs[i] = r
  parts[i] = string.pack(fmt, table.unpack(r))
end
local buf = table.concat(parts)
local at = 1
for i = 1, 20000 do
  local r = recs[i]
  local f1, f2, f3, f4, f5, f6, nxt = string.unpack(fmt, buf, at)
  assert(f1 == r[1] and f2 == r[2] and f3 == r[3] and f4 == r[4] and f5 == r[5] and f6 == r[6])
  at = nxt
end
assert(at == #buf + 1)

-- All widths 1..16, signed and unsigned, both byte orders, at boundary values.
for n = 1, 16 do
  local bits = n * 8
  local vals
  if bits >= 64 then
    vals = {0, 1, -1, math.maxinteger, math.mininteger, 0x0102030405060708}
  else
    local hi = (1 << (bits - 1)) - 1
    vals = {0, 1, -1, hi, -hi - 1, hi // 3}
  end
  for _, v in ipairs(vals) do
    for _, e in ipairs({"<", ">", "="}) do
      local fs = e .. "i" .. n
      local packed = string.pack(fs, v)
      assert(#packed == n and string.unpack(fs, packed) == v)
    end
  end
  if bits < 64 then
    local umax = (1 << bits) - 1
    assert(string.unpack("<I" .. n, string.pack("<I" .. n, umax)) == umax)
  end
end
-- Byte order reverses bytes.
for n = 2, 8 do
  local v = 0x0102030405060708 >> (8 * (8 - n))
  assert(string.pack("<I" .. n, v):reverse() == string.pack(">I" .. n, v))
end

-- A checksum over a large packed stream (FNV-1a, 64-bit, over the bytes): the value was
-- computed independently with Python's struct module.
local stream = {}
for i = 1, 5000 do stream[i] = string.pack(">i4 <I2 >d", i * 7919 - 20000000, i % 65536, i / 8) end
stream = table.concat(stream)
local hsh = 0xcbf29ce484222325
for i = 1, #stream do hsh = (hsh ~ stream:byte(i)) * 0x100000001b3 end
assert(#stream == 5000 * 14)
assert(hsh == 0xFAAE2DD2BE950663)
