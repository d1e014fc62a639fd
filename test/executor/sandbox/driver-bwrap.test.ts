/** The shared driver behaviour (suite.ts) against the real bwrap driver. */
import { driverSuite } from './suite.ts';

driverSuite('bwrap');
