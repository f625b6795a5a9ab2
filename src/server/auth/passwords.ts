// Password hashing with argon2id (Bun.password). A dummy hash lets a login for an unknown e-mail
// cost the same time as a wrong password, so timing does not reveal which accounts exist.

export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, { algorithm: 'argon2id' })
}

export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  try {
    return await Bun.password.verify(password, hash)
  } catch {
    return false
  }
}

let dummy: Promise<string> | undefined
/** Spends one verification's worth of time; always false. */
export async function burnPasswordCheck(password: string): Promise<false> {
  dummy ??= hashPassword('dbm-timing-equaliser')
  await verifyPassword(password, await dummy)
  return false
}
