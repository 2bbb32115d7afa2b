/* Access rights: one encoding for every exomem capability.
 *
 * Rights are bits that combine with |. Segment attachments (seg.h: SEG_RDONLY, SEG_RDWR),
 * page accessibility (vm.h: EXO_VM_NOACCESS, _READONLY, _READWRITE) and the library's own
 * internals all use these values, so a right means the same number wherever it appears.
 * Write without read does not exist on x86-64 (a writable page is readable): calls that take
 * an access accept EXO_ACCESS_NONE, EXO_ACCESS_READ and EXO_ACCESS_RW only, as each says.
 */
#ifndef EXOMEM_ACCESS_H
#define EXOMEM_ACCESS_H

#define EXO_ACCESS_NONE  0x0  /* no access: every load and store faults */
#define EXO_ACCESS_READ  0x1  /* loads allowed */
#define EXO_ACCESS_WRITE 0x2  /* stores allowed (only together with EXO_ACCESS_READ) */
#define EXO_ACCESS_RW    (EXO_ACCESS_READ | EXO_ACCESS_WRITE)

#endif
