/* base/fault_internal.h - what clformer/fault.h's CLF_FAULT asks of the core beyond failing a
 * call: the pause of `write_slow:<ms>` (base/fs.c). Private to the core. */
#ifndef CLF_BASE_FAULT_INTERNAL_H
#define CLF_BASE_FAULT_INTERNAL_H

/* Milliseconds each clf_fs_write_atomic pauses between its temporary file and the rename:
 * CLF_FAULT's write_slow:<ms>, 0 without it. */
unsigned clf_fault_write_pause_ms(void);

#endif
