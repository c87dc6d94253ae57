// The hook runner's wire client (wire.ts): SCRAM-SHA-256 as RFC 7677 §3 specifies (its example
// exchange), and each authentication a loopback server may ask for, against a real server of the
// test's own whose pg_hba.conf names one method per role.
import { readFile, writeFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scramFinal, simpleQuery, type WireTarget } from '../../../src/store/postgres/wire.ts';
import { startOwnPostgres, type OwnPostgres } from '../../helpers/own-postgres.ts';

it("answers RFC 7677's example server-first message with its client proof, and expects its server signature", () => {
  const nonce = 'rOprNGfwEbeRWgbNEkqO';
  const serverFirst = 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096';
  const out = scramFinal('pencil', serverFirst, { nonce, bare: `n=user,r=${nonce}` })!;
  // The password message: 'p', its length, then the client-final message.
  expect(out.reply.subarray(5).toString()).toBe(
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
  );
  expect(out.scram.signature).toBe('6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
});

it('refuses a server nonce that does not extend its own', () => {
  expect(
    scramFinal('pencil', 'r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', { nonce: 'mine', bare: 'n=*,r=mine' }),
  ).toBeNull();
});

describe('simpleQuery on a real server', () => {
  let own: OwnPostgres;
  const METHODS = ['trust', 'password', 'md5', 'scram-sha-256'] as const;
  const role = (m: (typeof METHODS)[number]) => `wire_${m.replace(/\W/g, '_')}`;
  const target = (m: (typeof METHODS)[number], password?: string): WireTarget => ({
    host: '127.0.0.1',
    port: own.port,
    user: role(m),
    database: 'postgres',
    password,
  });
  const SQL = "select 'a' || 'b', null::text union all select current_user, 'x'";

  beforeAll(async () => {
    own = await startOwnPostgres({ password: 'admin-pw', persistent: false });
    const admin = new pg.Client(own.url);
    await admin.connect();
    for (const m of METHODS) {
      await admin.query(`set password_encryption = '${m === 'md5' ? 'md5' : 'scram-sha-256'}'`);
      await admin.query(`create role ${role(m)} login password 'pw-${m}'`);
    }
    const hba = (await admin.query<{ hba_file: string }>('show hba_file')).rows[0]!.hba_file;
    const lines = METHODS.map((m) => `host all ${role(m)} 127.0.0.1/32 ${m}`).join('\n');
    await writeFile(hba, `${lines}\n${await readFile(hba, 'utf8')}`);
    await admin.query('select pg_reload_conf()');
    await admin.end();
    // The postmaster reads the file on SIGHUP: wait until the trust line lets a role in bare.
    for (let i = 0; i < 100; i++) {
      if (
        await simpleQuery(target('trust'), 'select 1', 2_000).then(
          () => true,
          () => false,
        )
      )
        return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('pg_hba.conf was not reloaded');
  }, 120_000);
  afterAll(async () => own?.close());

  it.each(METHODS)('%s: the rows come back as text, SQL NULL as null', async (m) => {
    const rows = await simpleQuery(target(m, m === 'trust' ? undefined : `pw-${m}`), SQL, 5_000);
    expect(rows).toEqual([
      ['ab', null],
      [role(m), 'x'],
    ]);
  });

  it('trust with a password at hand: the server asks for none, and the rows come back', async () => {
    expect(await simpleQuery(target('trust', 'unused'), 'select 7', 5_000)).toEqual([['7']]);
  });

  it.each(METHODS.filter((m) => m !== 'trust'))('%s without a password, or with a wrong one: rejects', async (m) => {
    await expect(simpleQuery(target(m), 'select 1', 5_000)).rejects.toThrow();
    await expect(simpleQuery(target(m, 'wrong'), 'select 1', 5_000)).rejects.toThrow(/server error 28P01/);
  });

  it('a query the server refuses rejects with its SQLSTATE', async () => {
    await expect(simpleQuery(target('trust'), 'select * from no_such_table', 5_000)).rejects.toThrow(
      /server error 42P01/,
    );
  });
});
