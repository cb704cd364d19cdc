/* The kvcache operator family: contracts land with the family's issue. */
#ifndef DSV4_KVCACHE_H
#define DSV4_KVCACHE_H

#include "dsv4/dsv4.h"

#endif
