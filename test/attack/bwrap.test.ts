/** The attack suite (test/attack/suite.ts) against a real agent whose jobs run in bwrap. */
import { attackSuite } from './suite.ts';

attackSuite('bwrap');
