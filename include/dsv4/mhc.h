/* The mhc operator family: contracts land with the family's issue. */
#ifndef DSV4_MHC_H
#define DSV4_MHC_H

#include "dsv4/dsv4.h"

#endif
