/*
 * frame.c: the calls of the public API on any frame (frame.h), consumed or reserved.
 */
#include "frame.h"

framesrv_frame_info *framesrv_frame_info_of(framesrv_frame *frame)
{
    return frame ? &frame->info : NULL;
}

void framesrv_frame_release(framesrv_frame *frame)
{
    if (frame && frame->release) frame->release(frame);
}
