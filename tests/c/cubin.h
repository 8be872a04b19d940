/* CUBINs made by hand for the tests of what a driver loads: small CUDA ELF
 * files with the header flags and the toolkit note NVRTC's carry, laid out
 * as ptxas lays them (header, sections, section table). */
#ifndef TACK_TEST_CUBIN_H
#define TACK_TEST_CUBIN_H

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct cubin_layout {
    Elf64_Ehdr eh;
    Elf64_Shdr sh[4];
    char shstrtab[64];
    struct {
        Elf64_Nhdr nh;
        char name[12];
        uint16_t desc[4];
    } note;
    unsigned char text[24];
};

/* A CUBIN for sm_<arch> made by toolkit `toolkit` (10 * major + minor) in
 * the CUDA ELF ABI version `abi` (7: the architecture in the flags' low
 * byte; 8, what NVRTC 13 writes: in their second byte), with an entry point
 * named tack_kernel_entry; with `note` 0 it has no toolkit note. malloc'd,
 * *size bytes; NULL when out of memory. */
static inline unsigned char *cubin(unsigned arch, int toolkit, int abi, int note, size_t *size)
{
    struct cubin_layout c;
    memset(&c, 0, sizeof c);
    memcpy(c.eh.e_ident, ELFMAG, SELFMAG);
    c.eh.e_ident[EI_CLASS] = ELFCLASS64;
    c.eh.e_ident[EI_DATA] = ELFDATA2LSB;
    c.eh.e_ident[EI_VERSION] = EV_CURRENT;
    c.eh.e_ident[EI_OSABI] = 0x41;
    c.eh.e_ident[EI_ABIVERSION] = (unsigned char)abi;
    c.eh.e_type = ET_EXEC;
    c.eh.e_machine = EM_CUDA;
    c.eh.e_version = EV_CURRENT;
    c.eh.e_flags = abi < 8 ? 0x500u | arch : 0x6000004u | arch << 8;
    c.eh.e_ehsize = sizeof c.eh;
    c.eh.e_shentsize = sizeof(Elf64_Shdr);
    c.eh.e_shnum = 4;
    c.eh.e_shstrndx = 1;
    size_t strtab = sizeof c.eh, notes = strtab + sizeof c.shstrtab, text = notes + sizeof c.note;
    c.eh.e_shoff = text + sizeof c.text;
    static const char names[] = "\0.shstrtab\0.note.nv.cuinfo\0.text.tack_kernel_entry";
    _Static_assert(sizeof names <= sizeof c.shstrtab, "the section names fit");
    memcpy(c.shstrtab, names, sizeof names);
    c.sh[1] = (Elf64_Shdr){.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = strtab, .sh_size = sizeof c.shstrtab};
    c.sh[2] = (Elf64_Shdr){.sh_name = 11, .sh_type = note ? SHT_NOTE : SHT_PROGBITS, .sh_offset = notes,
                           .sh_size = sizeof c.note};
    c.sh[3] = (Elf64_Shdr){.sh_name = 27, .sh_type = SHT_PROGBITS, .sh_offset = text, .sh_size = sizeof c.text};
    c.note.nh = (Elf64_Nhdr){.n_namesz = 12, .n_descsz = 8, .n_type = 1000};
    memcpy(c.note.name, "NVIDIA Corp", 12);
    c.note.desc[0] = 2;
    c.note.desc[1] = (uint16_t)arch;
    c.note.desc[2] = (uint16_t)toolkit;
    memset(c.text, 0x5a, sizeof c.text);

    *size = c.eh.e_shoff + sizeof c.sh;
    unsigned char *file = calloc(1, *size);
    if (!file)
        return NULL;
    memcpy(file, &c.eh, sizeof c.eh);
    memcpy(file + strtab, c.shstrtab, sizeof c.shstrtab);
    memcpy(file + notes, &c.note, sizeof c.note);
    memcpy(file + text, c.text, sizeof c.text);
    memcpy(file + c.eh.e_shoff, c.sh, sizeof c.sh);
    return file;
}

#endif
